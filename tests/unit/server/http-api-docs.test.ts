/**
 * docs/http-api.md stays true: it lists every route of the OpenAPI
 * document the server generates, and the files it names exist.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { createServerApp } from "../../../src/server/server-app.js";
import type { AgencyRunner } from "../../../src/agency/agency.js";

const ROOT = fileURLToPath(new URL("../../..", import.meta.url));

describe("docs/http-api.md", () => {
  it("lists every route of /v1/openapi.json and names only files that exist", async () => {
    const text = readFileSync(join(ROOT, "docs/http-api.md"), "utf8");
    const { app } = createServerApp({ runner: { home: "/nonexistent" } as unknown as AgencyRunner, token: "docs-test-token-0123456789" });
    const document = (await (await app.request("/v1/openapi.json", { headers: { authorization: "Bearer docs-test-token-0123456789" } })).json()) as {
      paths: Record<string, Record<string, unknown>>;
    };
    const routes = Object.entries(document.paths).flatMap(([path, methods]) => Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`));
    expect(routes.length).toBeGreaterThan(15);
    for (const route of routes) {
      const path = route.split(" ")[1]!;
      expect(text.includes(`${route}\``) || text.includes(`${route}?`) || text.includes(`${path}\``), route).toBe(true);
    }
    const files = [...new Set(text.match(/\b(?:src|tests|bench)\/[\w./-]+\.(?:ts|js)\b/g) ?? [])];
    expect(files.filter((file) => !existsSync(join(ROOT, file)))).toEqual([]);
  });
});
