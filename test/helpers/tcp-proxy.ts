/**
 * A TCP proxy in front of a real Redis, for network faults a test must place exactly: drop every
 * connection (a network blip: the client reconnects), or hold back the server's replies on a
 * connection from the moment the client sends a given command (a reply lost in flight).
 */
import net from "node:net";

export interface TcpProxy {
  url: string;
  /** Client connections accepted so far. */
  readonly accepted: number;
  /** Destroy every open connection, both sides. */
  dropAll(): void;
  /**
   * From now on, once a client sends bytes `matches` accepts (a RESP command, as it is written),
   * stop passing the server's replies to that connection. Once: the first such connection is
   * held, later ones are not. Resolves when that happened, with a function that drops that one
   * connection (the answer is then lost with it, and the client reconnects).
   *
   * Every reply on that connection is held from then on, also answers to commands sent before
   * the match that are still on their way. Processes share connections (a gateway and its
   * workers do), so a caller awaiting some other command on the same client must drop first
   * and await after, or it waits for an answer the hold keeps.
   */
  holdRepliesWhen(matches: (sent: string) => boolean): Promise<() => void>;
  close(): Promise<void>;
}

/**
 * A proxy in front of the Redis at `upstreamUrl`; its `url` is that URL with the proxy's address,
 * so a password (a REDIS_URL with one) and a database number carry over.
 */
export async function startTcpProxy(upstreamUrl: string): Promise<TcpProxy> {
  const upstreamAt = new URL(upstreamUrl);
  const upstreamPort = Number(upstreamAt.port || 6379);
  const upstreamHost = upstreamAt.hostname;
  const open = new Set<net.Socket>();
  let accepted = 0;
  let hold: { matches: (sent: string) => boolean; held: (drop: () => void) => void } | undefined;

  const server = net.createServer((client) => {
    accepted++;
    const upstream = net.connect(upstreamPort, upstreamHost);
    open.add(client).add(upstream);
    let holding = false;
    client.on("data", (chunk) => {
      const h = hold;
      if (h?.matches(chunk.toString("latin1"))) {
        holding = true;
        hold = undefined;
        h.held(() => end());
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk) => {
      if (!holding) client.write(chunk);
    });
    const end = () => {
      client.destroy();
      upstream.destroy();
      open.delete(client);
      open.delete(upstream);
    };
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;

  const proxied = new URL(upstreamUrl);
  proxied.hostname = "127.0.0.1";
  proxied.port = String(port);
  return {
    url: proxied.toString(),
    get accepted() {
      return accepted;
    },
    dropAll() {
      for (const s of open) s.destroy();
      open.clear();
    },
    holdRepliesWhen(matches) {
      return new Promise((resolve) => {
        hold = { matches, held: resolve };
      });
    },
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
