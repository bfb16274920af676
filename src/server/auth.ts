import { createHash, timingSafeEqual } from "node:crypto";
import type { MiddlewareHandler } from "hono";
import { getCookie, setCookie } from "hono/cookie";
import { HttpProblem, sendProblem } from "./problem.js";

/** The page's cookie: httpOnly, SameSite=Strict, set once from `?token=`. */
const TOKEN_COOKIE = "runner_token";

/**
 * The token check of `runner serve` (issue 23): every request but
 * `GET /v1/health` needs the token, loopback included, as
 * `Authorization: Bearer <token>` or the page's cookie. A GET with a
 * `?token=` that matches sets the cookie (httpOnly, SameSite=Strict, so no
 * script and no other site's request carries it) and redirects (303) to the
 * same address without the token, so it leaves the address bar and the
 * history. A request that the cookie authenticates and that changes
 * something must come from the page's own origin (`Origin`, when the browser
 * sends one, names the request's host; the scheme may differ behind a TLS
 * proxy): a second guard besides SameSite.
 * Anything else is a 401 problem. Tokens are compared in constant time.
 */
export function requireToken(token: string): MiddlewareHandler {
  const expected = digest(token);
  const matches = (candidate: string | undefined) => candidate !== undefined && timingSafeEqual(digest(candidate), expected);
  return async (context, next) => {
    const url = new URL(context.req.url);
    if (url.pathname === "/v1/health") return next();
    const bearer = /^Bearer\s+(.+)$/i.exec(context.req.header("authorization") ?? "")?.[1]?.trim();
    if (matches(bearer)) return next();
    const queryToken = url.searchParams.get("token") ?? undefined;
    if (context.req.method === "GET" && matches(queryToken)) {
      setCookie(context, TOKEN_COOKIE, token, { httpOnly: true, sameSite: "Strict", path: "/" });
      url.searchParams.delete("token");
      return context.redirect(`${url.pathname}${url.search}`, 303);
    }
    if (matches(getCookie(context, TOKEN_COOKIE))) {
      const origin = context.req.header("origin");
      if (context.req.method !== "GET" && context.req.method !== "HEAD" && origin !== undefined && hostOf(origin) !== url.host) {
        return sendProblem(
          context,
          new HttpProblem(403, "Cross-origin request", `a request from ${origin} cannot use the page's cookie; send the token as Authorization: Bearer`),
        );
      }
      return next();
    }
    return sendProblem(
      context,
      new HttpProblem(
        401,
        "Token required",
        bearer !== undefined || queryToken !== undefined
          ? "the token is wrong; use the one `runner serve` printed (or the --token-file's)"
          : "send the token `runner serve` printed as Authorization: Bearer <token>, or open the printed URL (…/?token=…) once in the browser",
      ),
    );
  };
}

function digest(value: string): Buffer {
  return createHash("sha256").update(value).digest();
}

function hostOf(origin: string): string | null {
  try {
    return new URL(origin).host;
  } catch {
    return null;
  }
}
