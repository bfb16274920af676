import type { Context, Hono } from "hono";
import { z } from "zod";
import { HttpProblem, invalidInput } from "./problem.js";
import { ProblemSchema } from "./api-schemas.js";

/** One response of a route: JSON of `schema`, or another media type (`text/event-stream`, `text/x-diff`, `text/html`). */
interface ResponseSpec {
  description: string;
  schema?: z.ZodType;
  mediaType?: string;
}

/** One route of the API: its method and path (Hono syntax, `:id`), what it reads and answers; the OpenAPI document is made of these. */
export interface RouteSpec<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType> {
  method: "get" | "post";
  path: string;
  summary: string;
  /** True only for /v1/health: every other request needs the token (issue 23). */
  public?: boolean;
  params?: P;
  query?: Q;
  body?: B;
  /** A body the handler reads itself (not JSON of a schema): its media types for the OpenAPI document. */
  rawBody?: { description: string; mediaTypes: string[] };
  /** Request headers worth naming (Idempotency-Key, Last-Event-ID). */
  headers?: Record<string, string>;
  responses: Record<number, ResponseSpec>;
}

export interface RouteInput<P extends z.ZodType, Q extends z.ZodType, B extends z.ZodType> {
  params: z.infer<P>;
  query: z.infer<Q>;
  body: z.infer<B>;
}

const EMPTY = z.object({}).strict();

/**
 * The API's routes on a Hono app, each with zod schemas for its path
 * parameters, query and body (parsed before the handler runs; a failure is a
 * 400 problem naming each field) and for its responses, and the OpenAPI 3.1
 * document made from them with zod 4's own `z.toJSONSchema`. Hand-written
 * rather than @hono/zod-openapi: its typed responses bind every handler's
 * return type to the route's schemas, which the streaming (SSE) and file
 * routes do not fit, and zod 4 already turns schemas into JSON Schema.
 */
export class ApiRoutes {
  private readonly specs: RouteSpec<z.ZodType, z.ZodType, z.ZodType>[] = [];

  constructor(private readonly app: Hono) {}

  add<P extends z.ZodType = typeof EMPTY, Q extends z.ZodType = typeof EMPTY, B extends z.ZodType = typeof EMPTY>(
    spec: RouteSpec<P, Q, B>,
    handler: (context: Context, input: RouteInput<P, Q, B>) => Response | Promise<Response>,
  ): void {
    this.specs.push(spec as unknown as RouteSpec<z.ZodType, z.ZodType, z.ZodType>);
    this.app.on(spec.method.toUpperCase(), spec.path, async (context) => {
      const params = parse("params", spec.params ?? EMPTY, context.req.param());
      const query = parse("query", spec.query ?? EMPTY, context.req.query());
      const body = spec.body ? parse("body", spec.body, await readJsonBody(context)) : {};
      return handler(context, { params, query, body } as RouteInput<P, Q, B>);
    });
  }

  /** The OpenAPI 3.1 document of every route added so far. */
  document(version: string): Record<string, unknown> {
    const paths: Record<string, Record<string, unknown>> = {};
    for (const spec of this.specs) {
      const path = spec.path.replace(/:(\w+)/g, "{$1}");
      const parameters = [
        ...objectFields(spec.params).map(([name, schema]) => ({ name, in: "path", required: true, schema: jsonSchema(schema) })),
        ...objectFields(spec.query).map(([name, schema]) => ({
          name,
          in: "query",
          required: !schema.safeParse(undefined).success,
          schema: jsonSchema(schema),
        })),
        ...Object.entries(spec.headers ?? {}).map(([name, description]) => ({ name, in: "header", required: false, description, schema: { type: "string" } })),
      ];
      const responses = Object.fromEntries(
        Object.entries<ResponseSpec>({ ...spec.responses, ...(spec.public ? {} : { 401: { description: "no or wrong token", schema: ProblemSchema } }) }).map(
          ([status, response]) => [
            status,
            {
              description: response.description,
              ...(response.schema || response.mediaType
                ? {
                    content: {
                      [response.mediaType ?? (Number(status) >= 400 ? "application/problem+json" : "application/json")]: response.schema
                        ? { schema: jsonSchema(response.schema) }
                        : {},
                    },
                  }
                : {}),
            },
          ],
        ),
      );
      paths[path] = {
        ...paths[path],
        [spec.method]: {
          summary: spec.summary,
          ...(spec.public ? { security: [] } : {}),
          ...(parameters.length ? { parameters } : {}),
          ...(spec.body ? { requestBody: { required: true, content: { "application/json": { schema: jsonSchema(spec.body, "input") } } } } : {}),
          ...(spec.rawBody
            ? {
                requestBody: {
                  required: true,
                  description: spec.rawBody.description,
                  content: Object.fromEntries(spec.rawBody.mediaTypes.map((type) => [type, {}])),
                },
              }
            : {}),
          responses,
        },
      };
    }
    return {
      openapi: "3.1.0",
      info: { title: "agent-runner HTTP API (runner serve)", version, description: "docs/http-api.md in the agent-runner repository" },
      components: { securitySchemes: { token: { type: "http", scheme: "bearer" }, cookie: { type: "apiKey", in: "cookie", name: "runner_token" } } },
      security: [{ token: [] }, { cookie: [] }],
      paths,
    };
  }
}

function parse<T extends z.ZodType>(where: string, schema: T, value: unknown): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) throw invalidInput(where, parsed.error);
  return parsed.data;
}

async function readJsonBody(context: Context): Promise<unknown> {
  const text = await context.req.text();
  if (text.trim() === "") return {};
  if (!(context.req.header("content-type") ?? "").toLowerCase().startsWith("application/json")) {
    throw new HttpProblem(415, "Unsupported media type", "send the body as JSON with Content-Type: application/json", {
      errors: [{ field: "header.content-type", message: "expected application/json" }],
    });
  }
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new HttpProblem(400, "Invalid request", `body: not JSON (${(error as Error).message}); send a JSON object`, {
      errors: [{ field: "body", message: "not JSON" }],
    });
  }
}

function objectFields(schema: z.ZodType | undefined): [string, z.ZodType][] {
  return schema instanceof z.ZodObject ? Object.entries(schema.shape as Record<string, z.ZodType>) : [];
}

function jsonSchema(schema: z.ZodType, io: "input" | "output" = "output"): unknown {
  return z.toJSONSchema(schema, { io, unrepresentable: "any" });
}
