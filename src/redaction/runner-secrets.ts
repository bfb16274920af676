import type { NamedSecret } from "./redactor.js";

/**
 * Credentials the runner process itself reads, or the SDKs it drives read
 * from the environment on their own: the model providers' keys (the openai
 * SDK also reads OPENAI_ADMIN_KEY and OPENAI_WEBHOOK_SECRET; @anthropic-ai/sdk
 * reads ANTHROPIC_AUTH_TOKEN), whatever a gateway error may quote back.
 */
const CREDENTIAL_VARIABLES = ["OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "OPENAI_WEBHOOK_SECRET", "ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN"];

/**
 * Variables holding URLs the runner or an SDK connects to (the providers'
 * base URLs, the proxy variables): a password, a user name or a query
 * parameter in one is a credential.
 */
const URL_VARIABLES = ["OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"];

/**
 * A host variable whose name says it holds a credential: its last part (after
 * `_`) is a word of secret-assignments.ts' list (TOKEN, SECRET, PASSWORD,
 * PASSWD, PASSPHRASE, CREDENTIALS, or KEY / PASS after a qualifier:
 * `NATS_TOKEN`, `RUNNER_SERVE_TOKEN`, `NATS_PASSWORD`, `GITHUB_TOKEN`). The
 * runner reads variables of its own front ends (the server's token, the bus's
 * credentials) through names of this kind, and registering all of them
 * keeps a new one from being missed; a value that equals one of them in a
 * record is redacted, whoever printed it.
 */
const SECRET_NAME = /_(?:TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|PASS|CREDENTIALS?|KEY)$/i;

/**
 * The secret values a run keeps out of its records (the Redactor's literals):
 * the task's `sandbox.secret_env` values, the credentials the runner reads
 * ({@link CREDENTIAL_VARIABLES}, every host variable with a secret-like name),
 * and the credentials inside the URLs it connects to (`model.base_url`,
 * {@link URL_VARIABLES}: see {@link credentialsInUrl}). Each named by where it
 * came from.
 */
export function runnerSecrets(
  task: { sandbox: { secret_env: readonly string[] }; model?: { base_url?: string | undefined } },
  environment: NodeJS.ProcessEnv,
): NamedSecret[] {
  const secrets: NamedSecret[] = [];
  const names = new Set([...CREDENTIAL_VARIABLES, ...task.sandbox.secret_env, ...Object.keys(environment).filter((name) => SECRET_NAME.test(name))]);
  for (const name of names) {
    const value = environment[name];
    if (value) secrets.push({ name, value });
  }
  const urls: [string, string | undefined][] = [
    ["model.base_url", task.model?.base_url],
    ...URL_VARIABLES.map((name): [string, string | undefined] => [name, environment[name]]),
  ];
  for (const [name, url] of urls) for (const value of credentialsInUrl(url)) secrets.push({ name, value });
  return secrets;
}

/**
 * The credentials a URL carries (RFC 3986 §3.2.1 userinfo, and the values
 * of query parameters named like credentials: some gateways take `?key=`,
 * `?api-key=` or `?sig=`), decoded and as written; none for a URL that does
 * not parse.
 */
export function credentialsInUrl(url: string | undefined): string[] {
  if (!url) return [];
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return [];
  }
  const found = new Set<string>();
  for (const part of [parsed.password, parsed.username]) {
    if (!part) continue;
    found.add(part);
    found.add(safeDecode(part));
  }
  if (parsed.password && parsed.username) found.add(`${parsed.username}:${parsed.password}`);
  for (const [name, value] of parsed.searchParams) if (value && SECRET_PARAMETER.test(name)) found.add(value);
  return [...found];
}

/** Query parameter names that carry a credential (`api-version=2024-02-01` does not). */
const SECRET_PARAMETER = /key|token|secret|sig|pass|auth|credential/i;

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
