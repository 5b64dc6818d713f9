/**
 * `redis.url` forms (docs/concepts/redis-cluster.md):
 *   redis://[user:pass@]host:port[/db]   one Redis (rediss:// for TLS)
 *   redis+cluster://[user:pass@]host:port,host:port,…   a Redis Cluster, by some of its nodes
 *                                        (rediss+cluster:// for TLS); the client learns the rest
 * One string, so the same value works in the config file, in REDIS_URL and for child processes.
 */

export interface SingleRedisTarget {
  kind: "single";
  url: string;
}

export interface ClusterRedisTarget {
  kind: "cluster";
  /** Seed nodes: any reachable one is enough for the client to learn the slot map. */
  nodes: { host: string; port: number }[];
  username?: string;
  password?: string;
  tls: boolean;
}

export type RedisTarget = SingleRedisTarget | ClusterRedisTarget;

const SINGLE = /^rediss?:\/\//;
const CLUSTER = /^(rediss?)\+cluster:\/\/(.*)$/;

/** Databases a default redis-server has (`databases 16`); a Redis Cluster has only 0. */
const MAX_DB = 15;

function checkDb(db: string, written: string): void {
  if (!/^\d{1,2}$/.test(db) || Number(db) > MAX_DB)
    throw new Error(
      `the database must be a number 0-${MAX_DB} (got "${written}"; a Redis Cluster has only database 0)`,
    );
}

/**
 * A redis:// or rediss:// URL is handed to ioredis as it is, and ioredis forgives too much: no
 * host means 127.0.0.1:6379 (the wrong server, silently), and a bad port or database becomes
 * `SELECT NaN` or an out-of-range SELECT retried for ever. So it is checked here, where the
 * config is validated, and every problem is named before anything connects.
 */
function checkSingleUrl(url: string): void {
  const shown = displayRedisUrl(url);
  // The authority by hand first: `new URL` only says "Invalid URL" for a bad port.
  // User info runs to the authority's last `@` (a password may hold a raw one).
  const m = /^rediss?:\/\/(?:[^/?#]*@)?([^/?#@]*)/.exec(url)!;
  const hostPort = /^(\[[^\]]*\]|[^:]*)(?::(.*))?$/.exec(m[1]!)!;
  if (!hostPort[1]) throw new Error(`no host in "${shown}" (e.g. redis://127.0.0.1:6379)`);
  const port = hostPort[2];
  if (port !== undefined && port !== "" && !(/^\d{1,5}$/.test(port) && Number(port) >= 1 && Number(port) <= 65535))
    throw new Error(`port must be a number 1-65535 (got "${port}" in "${shown}")`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new Error(`not a valid URL: "${shown}"`);
  }
  if (!parsed.hostname) throw new Error(`no host in "${shown}" (e.g. redis://127.0.0.1:6379)`);
  const path = parsed.pathname;
  if (path !== "" && path !== "/") checkDb(path.slice(1), path);
  const queryDb = parsed.searchParams.get("db");
  if (queryDb !== null) checkDb(queryDb, `?db=${queryDb}`);
}

// A second URL in the value (`redis://h1:7000,redis://h2:7001`): the start of every URL but the first.
const NEXT_URL = /(,\s*)(?=[a-z][a-z0-9+.-]*:\/\/)/i;

/** Parse a `redis.url` value, or throw an Error saying what is wrong with it. */
export function parseRedisUrl(url: string): RedisTarget {
  // Read as one URL, the rest of the list would be a port, a path or a password, and named so in the error.
  if (NEXT_URL.test(url))
    throw new Error(
      `one URL only (got "${displayRedisUrl(url)}"): a Redis Cluster is one ` +
        "redis+cluster://[user:pass@]host:port,host:port,… URL, its user name and password written once",
    );
  if (SINGLE.test(url)) {
    checkSingleUrl(url);
    return { kind: "single", url };
  }
  const m = CLUSTER.exec(url);
  if (!m) throw new Error("must be a redis://, rediss://, redis+cluster:// or rediss+cluster:// URL");
  let rest = m[2]!;
  // A trailing "/" or "/0" is accepted; a cluster has only database 0.
  const slash = rest.indexOf("/");
  if (slash >= 0) {
    const db = rest.slice(slash + 1);
    // A `@` after the `/` is a password's rest (a raw `/` in it): shown masked, not as the database.
    const shown = db.includes("@") ? `"${displayRedisUrl(url)}"` : `/${db}`;
    if (db !== "" && db !== "0") throw new Error(`a Redis Cluster has only database 0 (got ${shown})`);
    rest = rest.slice(0, slash);
  }
  const target: ClusterRedisTarget = { kind: "cluster", nodes: [], tls: m[1] === "rediss" };
  const nodes = splitClusterNodes(rest);
  const credentials = nodes.find((n) => n.userinfo !== undefined)?.userinfo;
  if (credentials !== undefined) {
    // ioredis connects to the nodes it learns from the cluster with one user name and password, so a node with
    // other credentials could never be used: refused, its host named, its credentials not.
    const other = nodes.find((n) => n.userinfo !== undefined && n.userinfo !== credentials);
    if (other)
      throw new Error(
        `cluster node "${other.hostPort.trim()}" has other credentials than the first: every node of a Redis Cluster ` +
          "takes the same user name and password; write them once, before the first node",
      );
    const colon = credentials.indexOf(":");
    const user = decodeURIComponent(colon >= 0 ? credentials.slice(0, colon) : credentials);
    const pass = colon >= 0 ? decodeURIComponent(credentials.slice(colon + 1)) : "";
    // redis://:pass@host (no user) is the usual way to give only a password.
    if (colon >= 0) {
      if (user) target.username = user;
      if (pass) target.password = pass;
    } else if (user) {
      target.password = user;
    }
  }
  const lastWithCredentials = nodes.findLastIndex((n) => n.userinfo !== undefined);
  nodes.forEach(({ hostPort }, i) => {
    // A node before one with credentials may be a piece of a password with a raw `,`: not shown.
    const named = i < lastWithCredentials ? `${i + 1}` : `"${hostPort}"`;
    const node = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+)(?::(\d{1,5}))?$/.exec(hostPort.trim());
    if (!node) throw new Error(`cluster node ${named} is not host:port`);
    const port = node[2] === undefined ? 6379 : Number(node[2]);
    if (port < 1 || port > 65535) throw new Error(`cluster node ${named} has no valid port`);
    target.nodes.push({ host: node[1]!.replace(/^\[|\]$/g, ""), port });
  });
  return target;
}

/** One node of a cluster URL's list: `host[:port]`, and the user info written in front of it, if any. */
interface ClusterNodeText {
  hostPort: string;
  userinfo?: string;
}

/**
 * A cluster URL's node list (`[user:pass@]h1:7000,[user:pass@]h2:7001`) node by node. A node's user info runs to
 * its last `@` (a password may hold a raw `@`), and pieces without `@` before the first node that has one belong
 * to its user info (a raw `,` in the password: `u:p,w@h1,h2`, which worked when user info was written only there).
 * A later node's user info is its own (`:pw@h1,:pw@h2`): read to the list's last `@`, it ran over the hosts
 * before it into one password.
 */
function splitClusterNodes(list: string): ClusterNodeText[] {
  const parts = list.split(",");
  const first = parts.findIndex((p) => p.includes("@"));
  const nodes: ClusterNodeText[] = [];
  for (let i = first < 0 ? 0 : first; i < parts.length; i++) {
    const part = parts[i]!;
    const at = part.lastIndexOf("@");
    if (at < 0) nodes.push({ hostPort: part });
    else {
      const own = part.slice(0, at);
      nodes.push({ hostPort: part.slice(at + 1), userinfo: i === first ? [...parts.slice(0, i), own].join(",") : own });
    }
  }
  return nodes;
}

/** `userinfo` as it may be shown: the password masked, a user name alone (which Redis takes as a password) too. */
function maskUserinfo(userinfo: string): string {
  const colon = userinfo.indexOf(":");
  return colon >= 0 ? `${userinfo.slice(0, colon)}:***` : "***";
}

/**
 * A cluster URL's node list as it may be shown: every node's user info masked on its own
 * (`:***@h1:7000,:***@h2:7001`). Pieces without `@` before a node with user info are masked with it: read with the
 * list's first user info (splitClusterNodes) or as a later node's password with a raw `,` (`:p,w@h2`), they may be
 * a password's piece; a node shown too little beats a password shown.
 */
function maskNodeList(list: string): string {
  const out: string[] = [];
  let pending: string[] = [];
  for (const part of list.split(",")) {
    const at = part.lastIndexOf("@");
    if (at < 0) pending.push(part);
    else {
      out.push(maskUserinfo([...pending, part.slice(0, at)].join(",")) + part.slice(at));
      pending = [];
    }
  }
  return [...out, ...pending].join(",");
}

/**
 * Whether `url` parses as a URL, as ioredis would read it. A cluster URL's node list (`h1:7000,h2:7001`) is no URL
 * authority, so it is checked with its first node only.
 */
function parsesAsUrl(url: string): boolean {
  try {
    new URL(url.replace(/^([^:/?#]*:\/\/[^/?#,]*),[^/?#]*/, "$1"));
    return true;
  } catch {
    return false;
  }
}

/**
 * Whether every `@` in `tail` (what follows the authority) is inside a query parameter's value (`?user=a@b`), where
 * it is data. In the path (a Redis URL's path is only a database number), in a parameter's name or in the fragment
 * it can only be the rest of a password with a raw `/`, `?` or `#`.
 */
function atOnlyInQueryValues(tail: string): boolean {
  const hash = tail.indexOf("#");
  const end = hash < 0 ? tail.length : hash;
  if (tail.includes("@", end)) return false;
  const query = tail.indexOf("?");
  const start = query < 0 || query > end ? end : query;
  if (tail.slice(0, start).includes("@")) return false;
  return tail
    .slice(start + 1, end)
    .split("&")
    .every((param) => !param.includes("@") || (param.includes("=") && param.indexOf("=") < param.indexOf("@")));
}

/**
 * `url` as it may be shown (logs, `status`, error messages): the password masked, and a user
 * name alone (`redis://secret@host`, which Redis takes as a password) masked too.
 *
 * The user info runs to the last `@` of the authority (everything after `://` up to the first
 * `/`, `?` or `#`), as ioredis and the WHATWG URL parser read it: a password may hold a raw `@`
 * (`redis://:p@ss@host`), so stopping at the first `@` would show the rest of it. A cluster URL's
 * authority is a list of nodes, and each node's user info is masked on its own (maskNodeList): one
 * mask up to the list's last `@` would eat the hosts between. Several URLs in one value
 * (`redis://:p1@h1,redis://:p2@h2`, refused by parseRedisUrl and shown in its error) are masked
 * each on its own: read as one, the second's password lay past the first's authority. When the
 * authority has none, a `@` further on is masked up to only when the URL does not parse, or when
 * that `@` is not in a query value (atOnlyInQueryValues): then it is a password with a raw `/`,
 * `?` or `#` (an invalid URL, shown in its error), and a host shown too little beats a password
 * shown. A `@` in a query value (`redis://host:6379/0?user=a@b`) is data and the URL is shown
 * whole. A `password=`-style query parameter (ioredis takes query parameters as options:
 * `password`, `sentinelPassword`) is masked too.
 */
export function displayRedisUrl(url: string): string {
  // Odd pieces are the separators between URLs.
  return url
    .split(NEXT_URL)
    .map((piece, i) => (i % 2 === 1 ? piece : displayOneUrl(piece)))
    .join("");
}

function displayOneUrl(url: string): string {
  // No scheme (a value refused as not a URL) is still masked: it may be `user:pass@host`.
  const m = /^([a-z][a-z0-9+.-]*:\/\/)?(.*)$/is.exec(url)!;
  const scheme = m[1] ?? "";
  let rest = m[2]!;
  const authorityEnd = rest.search(/[/?#]/);
  const authority = authorityEnd < 0 ? rest : rest.slice(0, authorityEnd);
  // A `@` past the authority that is no query value's: the rest of a password with a raw `/`, `?` or `#`.
  const atPastAuthority = (): boolean =>
    authorityEnd >= 0 &&
    rest.includes("@", authorityEnd) &&
    !(parsesAsUrl(url) && atOnlyInQueryValues(rest.slice(authorityEnd)));
  if (/\+cluster:\/\/$/i.test(scheme)) {
    // The node list then runs on to the end of the node after that `@` (`:p1@h1,:p/2@h2`: both nodes).
    let listEnd = authority.length;
    if (atPastAuthority()) {
      const last = rest.lastIndexOf("@");
      const after = rest.slice(last).search(/[/?#]/);
      listEnd = after < 0 ? rest.length : last + after;
    }
    const list = rest.slice(0, listEnd);
    if (list.includes("@")) rest = maskNodeList(list) + rest.slice(listEnd);
  } else {
    let at = authority.lastIndexOf("@");
    if (at < 0 && atPastAuthority()) at = rest.lastIndexOf("@");
    if (at >= 0) rest = maskUserinfo(rest.slice(0, at)) + rest.slice(at);
  }
  return scheme + rest.replace(/([?&][^=&#]*pass[^=&#]*=)[^&#]*/gi, "$1***");
}
