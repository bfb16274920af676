/**
 * The redactor against two corpora (issue 10, item 5):
 *
 * - credentials: the common credential shapes (GitHub's secret-scanning
 *   partner list and gitleaks' default rules are the anchors), with fake but
 *   realistic values generated here, each in the framings a run records them
 *   in; every one must be redacted with its kind, and no 8-character piece
 *   of its secret part may survive;
 * - ordinary text: this repository's own sources, tests, lock files and
 *   README, plus generated git SHAs, UUIDs, integrity hashes, base64 data,
 *   certificates, public keys and code that names secrets without holding
 *   one; the redactor must change nothing.
 *
 * Values are generated from a fixed seed, never written out, so that no
 * credential-shaped literal sits in this file (secret scanners, and the
 * ordinary corpus below, which reads this file too).
 */
import { createHash, randomUUID } from "node:crypto";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { CREDENTIAL_RULES } from "../../src/redaction/credential-rules.js";
import { Redactor } from "../../src/redaction/redactor.js";

/** mulberry32: a small seeded generator, so a failure names the same values every run. */
function generator(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = generator(20240610);
const from = (alphabet: string) => (length: number) => Array.from({ length }, () => alphabet[Math.floor(random() * alphabet.length)]).join("");
const LOWER = "abcdefghijklmnopqrstuvwxyz";
const UPPER = LOWER.toUpperCase();
const DIGITS = "0123456789";
const alnum = from(LOWER + UPPER + DIGITS);
const hex = from("0123456789abcdef");
const digits = from(DIGITS);
const letters = from(LOWER + UPPER);
const urlsafe = from(`${LOWER}${UPPER}${DIGITS}_-`);
const base64 = from(`${LOWER}${UPPER}${DIGITS}+/`);
/** A password of the kind people choose: letters, digits and a few symbols, at least one of each. */
const password = () => `${letters(5)}${digits(2)}!${alnum(4)}*${digits(1)}`;
/** A PEM body: base64 lines of 64 characters. */
const pemBody = (lines: number) => Array.from({ length: lines }, () => base64(64));

interface CredentialCase {
  name: string;
  kind: string;
  /** The text a tool printed or a file held. */
  text: string;
  /** What must not survive, in pieces that appear contiguously in the text. */
  secret: string[];
}

function credential(name: string, kind: string, value: string, context: (value: string) => string = (v) => `found ${v} in the output`): CredentialCase {
  return { name, kind, text: context(value), secret: [value] };
}

function pem(name: string, label: string, lines: number, context: (block: string) => string = (block) => `key file:\n${block}\n`): CredentialCase {
  const body = pemBody(lines);
  const block = [`-----BEGIN ${label}-----`, ...body, `-----END ${label}-----`].join("\n");
  return { name, kind: "private-key", text: context(block), secret: body };
}

const slackPath = `T0${alnum(8).toUpperCase()}/B0${alnum(8).toUpperCase()}/${alnum(24)}`;
const discordPath = `${digits(18)}/${urlsafe(68)}`;
const gcpKeyBody = pemBody(6);
const sasSignature = `${base64(30)}%2B${base64(10)}%3D`;

const CREDENTIALS: CredentialCase[] = [
  credential("Anthropic API key", "anthropic-key", `sk-ant-api03-${urlsafe(93)}AA`, (v) => `ANTHROPIC_API_KEY=${v}`),
  credential("Anthropic admin key", "anthropic-key", `sk-ant-admin01-${urlsafe(93)}AA`),
  credential("OpenAI legacy key", "openai-key", `sk-${alnum(48)}`, (v) => `OPENAI_API_KEY=${v}`),
  credential("OpenAI project key", "openai-key", `sk-proj-${urlsafe(156)}`, (v) => `{"api_key": "${v}"}`),
  credential("OpenAI service account key", "openai-key", `sk-svcacct-${urlsafe(120)}`),
  credential("GitHub classic PAT", "github-token", `ghp_${alnum(36)}`, (v) => `export GITHUB_TOKEN=${v}`),
  credential("GitHub OAuth token", "github-token", `gho_${alnum(36)}`),
  credential("GitHub user-to-server token", "github-token", `ghu_${alnum(36)}`),
  credential(
    "GitHub installation token in a clone URL",
    "github-token",
    `ghs_${alnum(36)}`,
    (v) => `git clone https://x-access-token:${v}@github.com/octo/repo.git`,
  ),
  credential("GitHub refresh token", "github-token", `ghr_${alnum(76)}`),
  credential("GitHub fine-grained PAT", "github-token", `github_pat_${alnum(22)}_${alnum(59)}`),
  credential("GitLab personal access token", "gitlab-token", `glpat-${urlsafe(20)}`, (v) => `PRIVATE-TOKEN: ${v}`),
  credential("GitLab deploy token", "gitlab-token", `gldt-${urlsafe(20)}`),
  credential("GitLab runner token", "gitlab-token", `glrt-${urlsafe(20)}`),
  credential("npm token in .npmrc", "npm-token", `npm_${alnum(36)}`, (v) => `//registry.example.com/:_authToken=${v}`),
  credential("Google API key", "google-api-key", `AIza${urlsafe(35)}`, (v) => `https://maps.googleapis.com/maps/api/geocode/json?key=${v}&address=x`),
  credential("Google OAuth client secret", "google-oauth-secret", `GOCSPX-${urlsafe(28)}`, (v) => `{"installed":{"client_secret":"${v}"}}`),
  credential("Stripe live secret key", "stripe-key", `sk_live_${alnum(99)}`),
  credential("Stripe restricted key", "stripe-key", `rk_live_${alnum(99)}`),
  credential("Stripe test key", "stripe-key", `sk_test_${alnum(24)}`, (v) => `stripe.api_key = "${v}"`),
  credential("Stripe webhook secret", "stripe-key", `whsec_${alnum(32)}`),
  credential("Hugging Face token", "huggingface-token", `hf_${letters(34)}`, (v) => `huggingface-cli login --token ${v}`),
  credential("Slack bot token", "slack-token", `xoxb-${digits(12)}-${digits(13)}-${alnum(24)}`),
  credential("Slack user token", "slack-token", `xoxp-${digits(12)}-${digits(12)}-${digits(13)}-${hex(32)}`),
  { name: "Slack webhook", kind: "slack-webhook", text: `curl -X POST https://hooks.slack.com/services/${slackPath} -d @msg.json`, secret: [slackPath] },
  credential("SendGrid key", "sendgrid-key", `SG.${urlsafe(22)}.${urlsafe(43)}`),
  credential("Twilio API key", "twilio-key", `SK${hex(32)}`),
  credential("Twilio auth token (assigned)", "secret-assignment", hex(32), (v) => `TWILIO_AUTH_TOKEN=${v}`),
  credential("Mailgun key", "mailgun-key", `key-${hex(32)}`),
  credential("Shopify access token", "shopify-token", `shpat_${hex(32)}`),
  credential("PyPI upload token", "pypi-token", `pypi-AgEIcHlwaS5vcmc${urlsafe(120)}`, (v) => `[pypi]\n  username = __token__\n  password = ${v}`),
  credential("Docker Hub token", "docker-hub-token", `dckr_pat_${urlsafe(27)}`, (v) => `echo ${v} | docker login -u someone --password-stdin`),
  credential("DigitalOcean token", "digitalocean-token", `dop_v1_${hex(64)}`),
  credential("Atlassian API token", "atlassian-token", `ATATT3xFfGF0${urlsafe(170)}=${hex(8).toUpperCase()}`),
  { name: "Discord webhook", kind: "discord-webhook", text: `webhook: https://discord.com/api/webhooks/${discordPath}`, secret: [discordPath] },
  credential("JWT", "jwt", `eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ${urlsafe(60)}.${urlsafe(43)}`, (v) => `session=${v}; Path=/`),
  credential("HashiCorp Vault token", "hashicorp-vault-token", `hvs.${urlsafe(95)}`),
  credential("AWS access key id", "aws-access-key-id", `AKIA${from(UPPER + "234567")(16)}`),
  credential(
    "AWS secret access key (ini)",
    "aws-secret-access-key",
    base64(40),
    (v) => `[default]\naws_access_key_id = AKIA${from(UPPER)(16)}\naws_secret_access_key = ${v}\n`,
  ),
  credential("AWS secret access key (env)", "aws-secret-access-key", base64(40), (v) => `export AWS_SECRET_ACCESS_KEY=${v}`),
  credential(
    "Azure storage connection string",
    "azure-storage-key",
    `${base64(86)}==`,
    (v) => `DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${v};EndpointSuffix=core.windows.net`,
  ),
  {
    name: "Azure SAS URL",
    kind: "azure-sas",
    text: `https://acct.blob.core.windows.net/c/f.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2030-01-01T00:00:00Z&sig=${sasSignature}`,
    secret: [sasSignature],
  },
  pem("RSA private key", "RSA PRIVATE KEY", 12),
  pem("EC private key", "EC PRIVATE KEY", 3),
  pem("OpenSSH private key", "OPENSSH PRIVATE KEY", 7),
  pem("PKCS#8 encrypted private key", "ENCRYPTED PRIVATE KEY", 9),
  pem("PGP private key block", "PGP PRIVATE KEY BLOCK", 10, (block) => block.replace("\n", "\n\n")),
  {
    name: "PEM key JSON-escaped (a service account file)",
    kind: "private-key",
    text: JSON.stringify({
      type: "service_account",
      private_key: `-----BEGIN PRIVATE KEY-----\n${gcpKeyBody.join("\n")}\n-----END PRIVATE KEY-----\n`,
      client_email: "x@p.iam.gserviceaccount.com",
    }),
    secret: gcpKeyBody,
  },
  credential("password in a database URL", "url-password", password().replace("!", "-"), (v) => `DATABASE_URL=postgres://app:${v}@db.internal:5432/app`),
  credential("password in an env file", "password", password(), (v) => `DB_PASSWORD=${v}`),
  credential("letters-only password in an env file", "password", letters(16), (v) => `POSTGRES_PASSWORD=${v}`),
  credential("secret exported in a shell", "secret-assignment", alnum(40), (v) => `export API_SECRET="${v}"`),
  credential("token assigned in an env file", "secret-assignment", alnum(40), (v) => `SERVICE_TOKEN=${v}`),
  credential("*_KEY assigned in an env file", "secret-assignment", hex(32), (v) => `PAYMENTS_API_KEY=${v}`),
  credential("api_key in YAML", "secret-assignment", urlsafe(32), (v) => `service:\n  api_key: ${v}\n  region: eu\n`),
  credential("password in JSON", "password", password(), (v) => `{"username": "admin", "password": "${v}"}`),
  credential("client_secret in TOML", "secret-assignment", alnum(40), (v) => `[oauth]\nclient_id = "abc"\nclient_secret = "${v}"\n`),
  credential("password in PHP", "password", password(), (v) => `'password' => '${v}',`),
  credential("password on a command line", "password", password(), (v) => `mysqldump --password=${v} app`),
  credential("Bearer token in a header", "bearer-token", `${alnum(20)}.${alnum(30)}`, (v) => `curl -H "Authorization: Bearer ${v}" https://api.example.test`),
  credential("Basic credentials in a header", "basic-auth", Buffer.from(`admin:${password()}`).toString("base64"), (v) => `Authorization: Basic ${v}`),
  credential("curl -u user:password", "curl-user-password", password(), (v) => `curl -sS -u deploy:${v} https://ci.example.test/api`),
];

/** Every 8-character piece of `secret` (all of it when shorter). */
function pieces(secret: string): string[] {
  if (secret.length <= 8) return [secret];
  return Array.from({ length: secret.length - 7 }, (_, index) => secret.slice(index, index + 8));
}

describe("Redactor: credential corpus", () => {
  const redactor = new Redactor();

  it("has the shapes the issue lists (33 or more)", () => {
    expect(CREDENTIALS.length).toBeGreaterThanOrEqual(33);
    expect(new Set(CREDENTIALS.map((entry) => entry.name)).size).toBe(CREDENTIALS.length);
  });

  it.each(CREDENTIALS.map((entry) => [entry.name, entry] as const))("%s", (_name, entry) => {
    // As printed, as JSON text (a tool result in a log line), and right after a JSON `\n` escape (JSON inside JSON).
    const framings = [
      entry.text,
      JSON.stringify({ output: entry.text }),
      JSON.stringify({ arguments: JSON.stringify({ content: `first line\n${entry.text}` }) }),
    ];
    for (const framing of framings) {
      const redacted = redactor.redact(framing);
      expect(redacted, framing).toContain(`[REDACTED:${entry.kind}]`);
      const survived = entry.secret.flatMap(pieces).filter((piece) => redacted.includes(piece));
      expect(survived, `${redacted}\n(from ${framing})`).toEqual([]);
    }
    const deep = redactor.redactDeep({ output: entry.text });
    for (const piece of entry.secret.flatMap(pieces)) expect(deep.output).not.toContain(piece);
  });

  it("keeps Anthropic keys whole under their own kind, not OpenAI's sk-", () => {
    for (const key of [`sk-ant-api03-${urlsafe(93)}AA`, `sk-ant-admin01-${urlsafe(93)}AA`]) {
      expect(redactor.redact(`x ${key} y`)).toBe("x [REDACTED:anthropic-key] y");
    }
  });

  it("keeps what is not secret readable: the word Bearer, the URL's scheme, user and host, the assigned name", () => {
    const pw = password().replace("!", "-");
    expect(redactor.redact(`postgres://app:${pw}@db.internal:5432/app`)).toBe("postgres://app:[REDACTED:url-password]@db.internal:5432/app");
    expect(redactor.redact(`https://hooks.slack.com/services/${slackPath}`)).toBe("https://hooks.slack.com/services/[REDACTED:slack-webhook]");
    expect(redactor.redact(`DB_PASSWORD=${pw} # prod`)).toBe("DB_PASSWORD=[REDACTED:password] # prod");
    expect(redactor.redact(`"client_secret": "${alnum(30)}"`)).toBe('"client_secret": "[REDACTED:secret-assignment]"');
  });

  it("lists every rule's kind and source", () => {
    for (const rule of CREDENTIAL_RULES) {
      expect(rule.from.length, rule.kind).toBeGreaterThan(10);
      expect(rule.keywords.length, rule.kind).toBeGreaterThan(0);
    }
  });
});

// ---------------------------------------------------------------- ordinary text

const ROOT = join(import.meta.dirname, "..", "..");

/**
 * Files of this repository that hold credentials on purpose (the redaction
 * tests, this one included, and the rules' own examples; a proxy test that
 * sends `Proxy-Authorization: Basic ...`): redacting them is right, so they
 * are no ordinary text.
 */
const DELIBERATE_CREDENTIALS = new Set([
  "src/redaction/secret-assignments.ts",
  "tests/unit/redaction.test.ts",
  "tests/unit/redaction-corpus.test.ts",
  "tests/integration/network-attacks.test.ts",
  // The servers' tests and bench authenticate with tokens of their own.
  "tests/helpers/server-client.ts",
  "tests/unit/mcp-http.test.ts",
  "tests/unit/server/server-api.test.ts",
  "tests/unit/server/http-api-docs.test.ts",
  "tests/e2e/mcp-server.test.ts",
  "tests/e2e/serve-cli.test.ts",
  "bench/serve.bench.ts",
  // Recorded commands of a public agent run, kept as they were (a password printed in a probe script).
  "tests/fixtures/shell-corpus/agent-commands.json",
]);

function repositoryFiles(): string[] {
  const files: string[] = [];
  const walk = (directory: string) => {
    for (const name of readdirSync(directory)) {
      if (name === "node_modules" || name === "dist" || name.startsWith(".")) continue;
      const path = join(directory, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.(?:ts|cjs|mjs|js|json|ya?ml|md|sh|toml)$|(?:^|\/)(?:Makefile|Dockerfile)$/.test(path)) files.push(path);
    }
  };
  for (const top of ["src", "tests", "bench", "scripts", "policies", "examples", "skills", "sandbox-images"]) walk(join(ROOT, top));
  for (const top of ["package.json", "package-lock.json", "README.md", "Makefile", "tsconfig.json"]) files.push(join(ROOT, top));
  return files.filter((path) => !DELIBERATE_CREDENTIALS.has(relative(ROOT, path)));
}

/** The lines `redact` changed, as `file:line: before => after`. */
function changedLines(name: string, text: string, redactor: Redactor): string[] {
  const redacted = redactor.redact(text);
  if (redacted === text) return [];
  const before = text.split("\n");
  const after = redacted.split("\n");
  const changes = before.flatMap((line, index) => (after[index] === line ? [] : [`${name}:${index + 1}: ${line.trim()} => ${after[index]?.trim()}`]));
  return changes.length ? changes : [`${name}: changed (across lines)`];
}

const hash = (algorithm: string, input: string, encoding: "hex" | "base64") => createHash(algorithm).update(input).digest(encoding);
const ordinaryGenerated: Record<string, string> = {
  "git SHAs": Array.from({ length: 500 }, (_, i) => `${hash("sha1", `c${i}`, "hex")} commit message ${i}`).join("\n"),
  UUIDs: Array.from({ length: 500 }, () => randomUUID()).join("\n"),
  "integrity hashes": Array.from({ length: 500 }, (_, i) => `"integrity": "sha512-${hash("sha512", `p${i}`, "base64")}"`).join(",\n"),
  "image digests and go.sum": Array.from(
    { length: 300 },
    (_, i) => `node@sha256:${hash("sha256", `i${i}`, "hex")}\nexample.org/m v1.0.${i} h1:${hash("sha256", `g${i}`, "base64")}`,
  ).join("\n"),
  "base64 data": Array.from({ length: 40 }, () => base64(4000)).join("\n"),
  "base64url and hex data": Array.from({ length: 40 }, () => `${urlsafe(2000)}\n${hex(2000)}`).join("\n"),
  "a data URL": `<img src="data:image/png;base64,${base64(20000)}">`,
  "public keys and certificates": [
    `ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI${base64(43)} someone@laptop`,
    `-----BEGIN CERTIFICATE-----\n${pemBody(12).join("\n")}\n-----END CERTIFICATE-----`,
    `-----BEGIN PUBLIC KEY-----\n${pemBody(4).join("\n")}\n-----END PUBLIC KEY-----`,
    `-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n${pemBody(10).join("\n")}\n-----END PGP PUBLIC KEY BLOCK-----`,
  ].join("\n"),
  "python that names secrets": [
    'password = getpass.getpass("Password: ")',
    'token = request.headers["Authorization"]',
    'api_key = os.environ["API_KEY"]',
    'secret = os.environ.get("SECRET_KEY")',
    "db_password = settings.DATABASE_PASSWORD",
    "client = OpenAI(api_key=api_key)",
    'resp = requests.get(url, auth=(user, password), headers={"Authorization": f"Bearer {token}"})',
    "if token == expected_token: pass",
    "def login(username, password=None, token=None): ...",
    "self.secret_key = secret_key",
    'access_token = response.json()["access_token"]',
    'eos_token = "</s>"',
    "max_tokens = 4096",
    "FAIL_TO_PASS: '[\"tests/test_calc.py::test_add\"]'",
    'PASS_TO_PASS = ["tests/test_x.py::test_keep"]',
    'primary_key = "id"',
    'cache_key = f"user:{user_id}"',
  ].join("\n"),
  "typescript that names secrets": [
    "const apiKey = process.env.OPENAI_API_KEY;",
    'const token = req.headers.authorization?.split(" ")[1];',
    "const { password, ...rest } = user;",
    'const secretName = "prod/db";',
    "type Options = { token?: string; apiKey: string; password: string | null };",
    "export const TOKEN_TTL_SECONDS = 3600;",
    'headers["X-Api-Key"] = config.apiKey;',
    "password: z.string().min(8),",
    "token: options.token ?? null,",
    "nextPageToken: response.nextPageToken,",
    'const label = ok ? "password" : "secret-assignment";',
    'throw new Error("token: invalid or expired, log in again");',
  ].join("\n"),
  "env names, empty values and placeholders": [
    "DB_PASSWORD=",
    "API_KEY=<your-api-key>",
    "SECRET_KEY=${SECRET_KEY}",
    "GITHUB_TOKEN=$GITHUB_TOKEN",
    "STRIPE_SECRET_KEY=changeme",
    "AUTH_TOKEN=your-token-here",
    "SESSION_SECRET=****************",
    'export AWS_SECRET_ACCESS_KEY="$AWS_SECRET"',
    "REDIS_PASSWORD=${REDIS_PASSWORD:-}",
    "DATABASE_URL=postgres://user:password@localhost:5432/app",
    "secret_env: [DB_PASSWORD, API_TOKEN]",
    "  NPM_TOKEN: ${{ secrets.NPM_TOKEN }}",
    "  password_file: /run/secrets/db_password",
    "  token_path: /var/run/secrets/kubernetes.io/serviceaccount/token",
    "http://allowed.test:80@denied.test/",
  ].join("\n"),
};

describe("Redactor: ordinary text is left alone", () => {
  const redactor = new Redactor(["not-in-any-of-these-files"]);

  it("this repository's sources, tests, lock files and README", () => {
    const files = repositoryFiles();
    expect(files.length).toBeGreaterThan(150);
    const changes = files.flatMap((path) => changedLines(relative(ROOT, path), readFileSync(path, "utf8"), redactor));
    expect(changes).toEqual([]);
  });

  it.each(Object.entries(ordinaryGenerated))("%s", (name, text) => {
    expect(changedLines(name, text, redactor)).toEqual([]);
  });
});

describe("Redactor: idempotence", () => {
  it("redacting redacted text changes nothing more", () => {
    const redactor = new Redactor();
    for (const entry of CREDENTIALS) {
      const once = redactor.redact(entry.text);
      expect(redactor.redact(once), entry.name).toBe(once);
    }
  });
});
