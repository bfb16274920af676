import type { Context } from "hono";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import type { z } from "zod";
import { ConfigError, RunnerError, SandboxError } from "../errors.js";
import { ProblemSchema, type Problem } from "./api-schemas.js";

/**
 * An HTTP error as an RFC 9457 problem: `status`, a short `title`, a
 * `detail` that names what is wrong and the fix, and, for a bad request,
 * `errors` naming each field (`body.task.hooks`, `query.limit`, ...).
 * Thrown by handlers; the app's error handler answers it as
 * `application/problem+json`.
 */
export class HttpProblem extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly title: string,
    readonly detail: string,
    readonly extensions: { errors?: { field: string; message: string }[]; [name: string]: unknown } = {},
  ) {
    super(detail);
  }

  /** The problem's JSON body (validated against {@link ProblemSchema}). */
  body(instance: string): Problem {
    return ProblemSchema.parse({ type: "about:blank", title: this.title, status: this.status, detail: this.detail, instance, ...this.extensions });
  }
}

/** A 400 naming every field zod found wrong in `where` (`body`, `query`, `params`), each with zod's message. */
export function invalidInput(where: string, error: z.ZodError): HttpProblem {
  const errors = error.issues.map((issue) => ({ field: [where, ...issue.path.map(String)].join("."), message: issue.message }));
  const detail = errors.map((entry) => `${entry.field}: ${entry.message}`).join("; ");
  return new HttpProblem(400, "Invalid request", `${detail} (see /v1/openapi.json for the request's schema)`, { errors });
}

/**
 * The problem for an error out of the Runner: ConfigError (bad task, a run
 * that cannot be resumed) is the caller's to fix (422 unless `status` says
 * otherwise), SandboxError is the infrastructure's (503), anything else a 500.
 */
export function problemOfError(error: unknown, configStatus: ContentfulStatusCode = 422): HttpProblem {
  if (error instanceof HttpProblem) return error;
  if (error instanceof ConfigError) return new HttpProblem(configStatus, "Request cannot be carried out", error.message, { reason: error.reason });
  if (error instanceof SandboxError) return new HttpProblem(503, "Infrastructure unavailable", error.message, { reason: error.reason });
  if (error instanceof RunnerError) return new HttpProblem(500, "Run failed to start", error.message, { reason: error.reason });
  return new HttpProblem(500, "Internal error", error instanceof Error ? error.message : String(error));
}

/** Sends `problem` as `application/problem+json`. */
export function sendProblem(context: Context, problem: HttpProblem): Response {
  const headers: Record<string, string> = { "content-type": "application/problem+json" };
  if (problem.status === 401) headers["www-authenticate"] = 'Bearer realm="runner"';
  return context.body(JSON.stringify(problem.body(new URL(context.req.url).pathname)), problem.status, headers);
}
