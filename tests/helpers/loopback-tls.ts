import net from "node:net";
import tls from "node:tls";

/**
 * The first TLS record a Node client sends (its ClientHello) for `options`
 * (e.g. `{ servername }`), as received by a plain TCP listener on 127.0.0.1,
 * which hangs up once the record is whole. For the egress proxy's
 * server-name check: real hello bytes, no hand-built ones.
 */
export async function captureClientHello(options: tls.ConnectionOptions): Promise<Buffer> {
  const listener = net.createServer();
  await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
  const received = new Promise<Buffer>((resolve) =>
    listener.once("connection", (socket) => {
      let bytes = Buffer.alloc(0);
      socket.on("data", (chunk: Buffer) => {
        bytes = Buffer.concat([bytes, chunk]);
        if (bytes.length >= 5 && bytes.length >= 5 + bytes.readUInt16BE(3)) {
          resolve(bytes);
          socket.destroy();
        }
      });
    }),
  );
  const client = tls.connect({ host: "127.0.0.1", port: (listener.address() as net.AddressInfo).port, ...options });
  client.on("error", () => undefined); // the listener hangs up mid-handshake
  try {
    return await received;
  } finally {
    client.destroy();
    listener.close();
  }
}

/** A TCP port on 127.0.0.1 that was free a moment ago (for a process that must be told its port up front). */
export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
