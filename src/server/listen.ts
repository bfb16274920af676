import type { AddressInfo } from "node:net";
import { serve, type ServerType } from "@hono/node-server";
import type { Hono } from "hono";

/** A listening server: its base URL (no token) and how to stop it. */
export interface Listening {
  url: string;
  port: number;
  server: ServerType;
  /** Drops every open connection (SSE streams included) and keeps listening: what a network cut does to the clients. */
  dropConnections(): void;
  close(): Promise<void>;
}

/**
 * Serves `app` on `host:port` (port 0: any free one) with @hono/node-server;
 * resolves once it listens. Rejects when the address is taken or cannot be
 * bound (the error's `code`, e.g. EADDRINUSE).
 */
export function listen(app: Hono, host: string, port: number): Promise<Listening> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, hostname: host, port }, (info: AddressInfo) => {
      server.off("error", reject);
      const shown = host.includes(":") ? `[${host}]` : host;
      resolve({
        url: `http://${shown}:${info.port}`,
        port: info.port,
        server,
        dropConnections: () => (server as { closeAllConnections?: () => void }).closeAllConnections?.(),
        close: () =>
          new Promise<void>((done) => {
            // SSE connections stay open until their run ends: close them with the server.
            (server as { closeAllConnections?: () => void }).closeAllConnections?.();
            server.close(() => done());
          }),
      });
    });
    server.once("error", reject);
  });
}
