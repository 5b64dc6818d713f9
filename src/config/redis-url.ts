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

/** Parse a `redis.url` value, or throw an Error saying what is wrong with it. */
export function parseRedisUrl(url: string): RedisTarget {
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
    if (db !== "" && db !== "0") throw new Error(`a Redis Cluster has only database 0 (got /${db})`);
    rest = rest.slice(0, slash);
  }
  const target: ClusterRedisTarget = { kind: "cluster", nodes: [], tls: m[1] === "rediss" };
  const at = rest.lastIndexOf("@");
  if (at >= 0) {
    const auth = rest.slice(0, at);
    rest = rest.slice(at + 1);
    const colon = auth.indexOf(":");
    const user = decodeURIComponent(colon >= 0 ? auth.slice(0, colon) : auth);
    const pass = colon >= 0 ? decodeURIComponent(auth.slice(colon + 1)) : "";
    // redis://:pass@host (no user) is the usual way to give only a password.
    if (colon >= 0) {
      if (user) target.username = user;
      if (pass) target.password = pass;
    } else if (user) {
      target.password = user;
    }
  }
  for (const part of rest.split(",")) {
    const node = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+)(?::(\d{1,5}))?$/.exec(part.trim());
    if (!node) throw new Error(`cluster node "${part}" is not host:port`);
    const port = node[2] === undefined ? 6379 : Number(node[2]);
    if (port < 1 || port > 65535) throw new Error(`cluster node "${part}" has no valid port`);
    target.nodes.push({ host: node[1]!.replace(/^\[|\]$/g, ""), port });
  }
  return target;
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
 * (`redis://:p@ss@host`), so stopping at the first `@` would show the rest of it. When the
 * authority has none, a `@` further on is masked up to only when the URL does not parse, or when
 * that `@` is not in a query value (atOnlyInQueryValues): then it is a password with a raw `/`,
 * `?` or `#` (an invalid URL, shown in its error), and a host shown too little beats a password
 * shown. A `@` in a query value (`redis://host:6379/0?user=a@b`) is data and the URL is shown
 * whole. A `password=`-style query parameter (ioredis takes query parameters as options:
 * `password`, `sentinelPassword`) is masked too.
 */
export function displayRedisUrl(url: string): string {
  // No scheme (a value refused as not a URL) is still masked: it may be `user:pass@host`.
  const m = /^([a-z][a-z0-9+.-]*:\/\/)?(.*)$/is.exec(url)!;
  const scheme = m[1] ?? "";
  let rest = m[2]!;
  const authorityEnd = rest.search(/[/?#]/);
  const authority = authorityEnd < 0 ? rest : rest.slice(0, authorityEnd);
  let at = authority.lastIndexOf("@");
  if (at < 0 && authorityEnd >= 0 && !(parsesAsUrl(url) && atOnlyInQueryValues(rest.slice(authorityEnd)))) {
    at = rest.lastIndexOf("@");
  }
  if (at >= 0) {
    const userinfo = rest.slice(0, at);
    const colon = userinfo.indexOf(":");
    rest = `${colon >= 0 ? `${userinfo.slice(0, colon)}:***` : "***"}${rest.slice(at)}`;
  }
  return scheme + rest.replace(/([?&][^=&#]*pass[^=&#]*=)[^&#]*/gi, "$1***");
}
