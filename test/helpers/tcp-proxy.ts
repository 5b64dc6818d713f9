/**
 * A TCP proxy in front of a real Redis, for network faults a test must place exactly: drop every
 * connection (a network blip: the client reconnects), or hold back the server's replies on a
 * connection from the moment the client sends a given command (a reply still in flight).
 */
import net from "node:net";

export interface TcpProxy {
  url: string;
  /** Client connections accepted so far. */
  readonly accepted: number;
  /** Destroy every open connection, both sides. */
  dropAll(): void;
  /**
   * From now on, on connections opened after this call: once the client sends `command` (a RESP
   * bulk string that is exactly that word, any case: not a mention inside another argument),
   * stop passing the server's replies to it. Resolves when that happened.
   */
  holdRepliesAfter(command: string): Promise<void>;
  close(): Promise<void>;
}

export async function startTcpProxy(upstreamPort: number, upstreamHost = "127.0.0.1"): Promise<TcpProxy> {
  const open = new Set<net.Socket>();
  let accepted = 0;
  let hold: { command: string; fromConnection: number; held: () => void } | undefined;

  const server = net.createServer((client) => {
    const n = ++accepted;
    const upstream = net.connect(upstreamPort, upstreamHost);
    open.add(client).add(upstream);
    let holding = false;
    client.on("data", (chunk) => {
      const h = hold;
      if (h && n > h.fromConnection && chunk.toString("latin1").toLowerCase().includes(`\r\n${h.command}\r\n`)) {
        holding = true;
        h.held();
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

  return {
    url: `redis://127.0.0.1:${port}`,
    get accepted() {
      return accepted;
    },
    dropAll() {
      for (const s of open) s.destroy();
      open.clear();
    },
    holdRepliesAfter(command) {
      return new Promise((resolve) => {
        hold = { command: command.toLowerCase(), fromConnection: accepted, held: resolve };
      });
    },
    async close() {
      for (const s of open) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
