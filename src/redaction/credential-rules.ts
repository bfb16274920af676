/**
 * Credential shapes the {@link Redactor} finds without being told the value:
 * one rule per kind of credential, each with where its shape comes from.
 *
 * Why rules of our own: gitleaks' `config/gitleaks.toml` (the anchor, with
 * GitHub's list of secret-scanning patterns) is written for Go's RE2, whose
 * inline flags (`(?i)` mid-pattern, `(?-i:...)`) Node 20's RegExp does not
 * take, and it leans on entropy thresholds and per-rule allow-lists; the one
 * maintained npm rule set, secretlint, only has an asynchronous API
 * (`lintSource(): Promise`) that reports findings instead of replacing them,
 * where the redactor runs synchronously on every event and log line, and it
 * lacks about half the shapes below (Stripe, Twilio, Mailgun, PyPI,
 * DigitalOcean, Atlassian, Discord, JWTs, Azure, URL passwords). So the
 * shapes are ported here, with lengths loosened where a vendor documents no
 * exact length, and each rule names the gitleaks rule id it follows
 * (`gitleaks:<id>`, gitleaks commit b58d3f1, 2026-07) and/or the vendor's own
 * description of the format.
 *
 * A rule's `source` is a RegExp source without flags, tried where one of its
 * `keywords` starts (all rules in one case-sensitive sticky expression, in
 * list order); a match that starts with a letter or digit must not continue
 * a word (the character before is no letter, digit, `_` or `-`, or it is the
 * letter of a JSON escape such as `\n`). It has at most one capturing group: when
 * present, only that group is redacted and what comes before it is kept (the
 * word `Bearer`, `https://user:` of a URL, `AccountKey=`), and the group
 * must end where the match ends. `accept`, when given, vetoes a match by its
 * secret part (a placeholder such as `${DB_PASSWORD}` in a URL).
 *
 * Sources: GitHub, "Supported secret scanning patterns"
 * (https://docs.github.com/en/code-security/secret-scanning/introduction/supported-secret-scanning-patterns);
 * gitleaks default rules (https://github.com/gitleaks/gitleaks/blob/master/config/gitleaks.toml).
 */
export interface CredentialRule {
  kind: string;
  /**
   * Literal text every match starts with (gitleaks calls them keywords): the
   * redactor looks for these first and tries the rules only where one is. So
   * that the search stays fast (see `compileRules` in redactor.ts), a keyword
   * starts with `-` or `:`, holds `_ . - = :` after its first character, or
   * starts with an upper-case letter (or is `eyJ`).
   */
  keywords: readonly string[];
  source: string;
  /** Where the shape comes from (shown in the README's table). */
  from: string;
  accept?: (secret: string) => boolean;
}

/** Nothing of the token's own alphabet follows (for fixed-length shapes). */
const END = "(?![A-Za-z0-9_-])";

/** Values that stand for a secret without being one: references, templates, masks, documentation words. */
export function isPlaceholder(value: string): boolean {
  if (/^\$(?:\{|\(|[A-Za-z_])/.test(value)) return true; // $VAR ${VAR} $(cmd)
  if (/^%[A-Za-z_][A-Za-z0-9_]*%$/.test(value) || /^\{\{.*\}\}$/.test(value) || /^#\{.*\}$/.test(value) || /^<.*>$/.test(value)) return true;
  if (/^\[REDACTED/i.test(value)) return true;
  if (/^(.)\1*$/.test(value)) return true; // ****, xxxxxxxx
  const word = value.toLowerCase().replace(/[-_. ]/g, "");
  return PLACEHOLDER_WORDS.has(word) || /^(?:your|insert|replace|enter)[-_ .]/i.test(value) || /^your[a-z]/i.test(value);
}

/**
 * Whole values (compared lower-case, without `-_. `) taken as documentation
 * or defaults rather than secrets. `changeme` is on the list: it is the
 * default password of many images and documentation, and it protects nothing.
 */
const PLACEHOLDER_WORDS = new Set([
  "changeme",
  "changeit",
  "password",
  "passwd",
  "pass",
  "pwd",
  "secret",
  "token",
  "apikey",
  "example",
  "placeholder",
  "redacted",
  "dummy",
  "none",
  "null",
  "nil",
  "undefined",
  "true",
  "false",
  "required",
  "optional",
  "todo",
  "empty",
  "string",
  "notset",
  "unset",
]);

const notPlaceholder = (secret: string) => !isPlaceholder(secret);

/**
 * `sk-` and hyphen-separated words (`sk-learn-0-24-docs`) is not a key: a key
 * with parts has 20 characters or more after `sk-` and a part of 6 or more
 * that mixes letters and digits (random text has one; words do not).
 */
function looksLikeOpenAiKey(key: string): boolean {
  const body = key.slice(3);
  if (!body.includes("-") || /^(?:proj|svcacct|admin|None)-/.test(body)) return true;
  return body.replace(/-/g, "").length >= 20 && body.split("-").some((part) => part.length >= 6 && /[0-9]/.test(part) && /[A-Za-z]/.test(part));
}

/** An HTTP Authorization header or field, as in curl -H, raw HTTP and JSON. */
const AUTHORIZATION = ["Authorization:", "authorization:", "Authorization=", "authorization=", 'Authorization":', 'authorization":'];

// Token characters of RFC 6750's b64token.
const B64 = "[A-Za-z0-9\\-._~+/]";

/**
 * Order matters: when two rules match at the same place the first one listed
 * wins (Anthropic before OpenAI's `sk-`, Grafana's `eyJrIjoi` before JWTs),
 * and a merged span takes the label of its earliest-listed rule.
 */
export const CREDENTIAL_RULES: readonly CredentialRule[] = [
  {
    kind: "private-key",
    keywords: ["-----BEGIN ", "---- BEGIN "],
    // Every PEM framing (RSA, EC, DSA, OPENSSH, ENCRYPTED, PGP ... BLOCK, SSH2's four dashes), also JSON-escaped
    // (`\n` between the lines); without the end line (truncated output) to the end of the text or of the JSON string.
    // A key body (32 base64 characters in a row, within 300 characters) must follow: a header alone is documentation.
    source:
      '-{4,5} ?BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)? ?-{4,5}(?=[^"]{0,300}?[A-Za-z0-9+/]{32})[^"]*?(?:-{4,5} ?END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)? ?-{4,5}|(?=\\\\*")|$)',
    from: "gitleaks:private-key; RFC 7468 (PEM), RFC 4880 §6.2 (OpenPGP armor), RFC 4716 (SSH2), OpenSSH PROTOCOL.key",
  },
  {
    kind: "private-key",
    keywords: ["PuTTY-User-Key-File-"],
    source: 'PuTTY-User-Key-File-[23]: [^"]*?(?:Private-MAC: [0-9a-f]+|(?=\\\\*")|$)',
    from: "PuTTY manual, appendix C (PPK file format)",
  },
  {
    kind: "anthropic-key",
    keywords: ["sk-ant-"],
    source: "sk-ant-[a-z]{2,8}\\d{2}-[A-Za-z0-9_-]{20,}",
    from: "gitleaks:anthropic-api-key, anthropic-admin-api-key (sk-ant-api03-, sk-ant-admin01-); GitHub partner list (Anthropic)",
  },
  {
    kind: "openai-key",
    keywords: ["sk-"],
    // The legacy key is all letters and digits; one with hyphen-separated parts (service-account and admin keys,
    // `sk-<part>-<part>-…`) falls through to the next alternative, so that no part of it stays readable.
    source:
      "sk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{20,}(?:T3BlbkFJ[A-Za-z0-9]{20,})?(?![A-Za-z0-9_-])|[A-Za-z0-9_]+(?:-[A-Za-z0-9_]+)+)",
    from: "gitleaks:openai-api-key; GitHub partner list (OpenAI); OpenAI docs (project, service-account and admin keys)",
    accept: looksLikeOpenAiKey,
  },
  {
    kind: "github-token",
    keywords: ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
    source: "(?:gh[pousr]_[A-Za-z0-9_]{36,255}|github_pat_[A-Za-z0-9_]{22,255})",
    from: 'gitleaks:github-pat, github-oauth, github-app-token, github-refresh-token, github-fine-grained-pat; GitHub blog "Behind GitHub\'s new authentication token formats" (2021)',
  },
  {
    kind: "gitlab-token",
    keywords: ["glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glsoat-", "glcbt-", "glimt-", "glagent-", "gloas-", "glffct-", "glwt-", "GR1348941"],
    source: "(?:gl(?:pat|dt|rt|ptt|ft|soat|cbt|imt|agent|oas|ffct|wt)-[A-Za-z0-9_.-]{20,}|GR1348941[A-Za-z0-9_-]{20,})",
    from: 'gitleaks:gitlab-pat, gitlab-pat-routable, gitlab-deploy-token, gitlab-runner-authentication-token, gitlab-ptt, gitlab-feed-token, gitlab-scim-token, gitlab-cicd-job-token, gitlab-incoming-mail-token, gitlab-kubernetes-agent-token, gitlab-oauth-app-secret, gitlab-feature-flag-client-token, gitlab-rrt; GitLab docs "Token overview"',
  },
  {
    kind: "npm-token",
    keywords: ["npm_"],
    source: `npm_[A-Za-z0-9]{36}${END}`,
    from: 'gitleaks:npm-access-token; GitHub blog "npm\'s new access token format" (2021)',
  },
  { kind: "google-api-key", keywords: ["AIza"], source: `AIza[0-9A-Za-z_-]{35}${END}`, from: "gitleaks:gcp-api-key; GitHub partner list (google_api_key)" },
  { kind: "google-oauth-secret", keywords: ["GOCSPX-"], source: "GOCSPX-[A-Za-z0-9_-]{24,40}", from: "GitHub partner list (google_oauth_client_secret)" },
  { kind: "google-oauth-token", keywords: ["ya29."], source: "ya29\\.[0-9A-Za-z_-]{20,}", from: "GitHub partner list (google_oauth_access_token)" },
  {
    kind: "stripe-key",
    keywords: ["sk_live_", "sk_test_", "sk_prod_", "rk_live_", "rk_test_", "rk_prod_", "whsec_"],
    source: "(?:(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{10,247}|whsec_[A-Za-z0-9]{24,})",
    from: 'gitleaks:stripe-access-token; Stripe docs "API keys" and "Webhooks: verify signatures"',
  },
  {
    kind: "huggingface-token",
    keywords: ["hf_", "api_org_"],
    source: "(?:hf_|api_org_)[A-Za-z0-9]{30,}",
    from: "gitleaks:huggingface-access-token, huggingface-organization-api-token",
  },
  {
    kind: "slack-token",
    keywords: ["xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxe-", "xoxr-", "xoxe.", "xapp-"],
    source: "(?:xox[abposer]-[A-Za-z0-9-]{10,}|xoxe\\.xox[bp]-\\d-[A-Za-z0-9]{20,}|xapp-\\d-[A-Za-z0-9-]{10,})",
    from: 'gitleaks:slack-bot-token, slack-user-token, slack-app-token, slack-legacy-*, slack-config-*; Slack docs "Token types"',
  },
  {
    kind: "slack-webhook",
    keywords: ["hooks.slack.com/"],
    source: "hooks\\.slack\\.com/(?:services|workflows|triggers)/([A-Za-z0-9+/_-]{20,})",
    from: 'gitleaks:slack-webhook-url; Slack docs "Sending messages using incoming webhooks"',
  },
  {
    kind: "discord-webhook",
    keywords: ["discord.com/", "discordapp.com/"],
    source: "discord(?:app)?\\.com/api/webhooks/([0-9]{17,20}/[A-Za-z0-9_-]{60,})",
    from: 'GitHub partner list (Discord webhook URL); Discord docs "Webhook resource"',
  },
  {
    kind: "sendgrid-key",
    keywords: ["SG."],
    source: "SG\\.[A-Za-z0-9_-]{16,32}\\.[A-Za-z0-9_-]{16,64}",
    from: 'gitleaks:sendgrid-api-token; Twilio SendGrid docs "API keys"',
  },
  { kind: "twilio-key", keywords: ["SK"], source: `SK[0-9a-fA-F]{32}${END}`, from: 'gitleaks:twilio-api-key; Twilio docs "API keys" (SK + 32 hex)' },
  { kind: "mailgun-key", keywords: ["key-"], source: `key-[0-9a-f]{32}${END}`, from: 'gitleaks:mailgun-private-api-token (without its "mailgun" keyword)' },
  {
    kind: "shopify-token",
    keywords: ["shpat_", "shpca_", "shppa_", "shpss_"],
    source: `shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}${END}`,
    from: "gitleaks:shopify-access-token, shopify-custom-access-token, shopify-private-app-access-token, shopify-shared-secret",
  },
  {
    kind: "pypi-token",
    keywords: ["pypi-AgE"],
    source: "pypi-AgE[A-Za-z0-9_-]{50,}",
    from: "gitleaks:pypi-upload-token (PyPI upload macaroons)",
  },
  {
    kind: "docker-hub-token",
    keywords: ["dckr_pat_", "dckr_oat_"],
    source: "dckr_(?:pat|oat)_[A-Za-z0-9_-]{20,}",
    from: 'GitHub partner list (docker_personal_access_token); Docker docs "Personal access tokens"',
  },
  {
    kind: "digitalocean-token",
    keywords: ["doo_v1_", "dop_v1_", "dor_v1_"],
    source: `do[opr]_v1_[a-f0-9]{64}${END}`,
    from: "gitleaks:digitalocean-pat, digitalocean-access-token, digitalocean-refresh-token",
  },
  {
    kind: "atlassian-token",
    keywords: ["ATATT3", "ATCTT3", "ATBB"],
    source: "(?:ATATT3|ATCTT3|ATBB)[A-Za-z0-9_=-]{24,}",
    from: "gitleaks:atlassian-api-token (ATATT3); GitHub partner list (atlassian_api_token, Bitbucket app password ATBB)",
  },
  { kind: "heroku-key", keywords: ["HRKU-AA"], source: "HRKU-AA[0-9A-Za-z_-]{58}", from: "gitleaks:heroku-api-key-v2" },
  { kind: "hashicorp-vault-token", keywords: ["hvs.", "hvb."], source: "hv[sb]\\.[A-Za-z0-9_-]{90,}", from: "gitleaks:vault-service-token, vault-batch-token" },
  { kind: "linear-key", keywords: ["lin_api_"], source: `lin_api_[A-Za-z0-9]{40}${END}`, from: "gitleaks:linear-api-key" },
  {
    kind: "notion-token",
    keywords: ["ntn_", "secret_"],
    source: `(?:ntn_[0-9]{11}[A-Za-z0-9]{35}|secret_[A-Za-z0-9]{43})${END}`,
    from: 'gitleaks:notion-api-token; Notion docs "Authorization" (internal integration secret_)',
  },
  {
    kind: "sentry-token",
    keywords: ["sntrys_", "sntryu_"],
    source: "(?:sntrys_eyJ[A-Za-z0-9+/=_]{30,}|sntryu_[a-f0-9]{64})",
    from: "gitleaks:sentry-org-token, sentry-user-token",
  },
  {
    kind: "doppler-token",
    keywords: ["dp."],
    source: "dp\\.(?:pt|st|sa|ct|scim|audit)\\.[A-Za-z0-9]{40,44}",
    from: 'gitleaks:doppler-api-token; Doppler docs "Token formats"',
  },
  { kind: "pulumi-token", keywords: ["pul-"], source: `pul-[a-f0-9]{40}${END}`, from: "gitleaks:pulumi-api-token" },
  { kind: "postman-key", keywords: ["PMAK-"], source: `PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}${END}`, from: "gitleaks:postman-api-token" },
  {
    kind: "grafana-token",
    keywords: ["glsa_", "glc_", "eyJrIjoi"],
    source: "(?:glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,3}|eyJrIjoi[A-Za-z0-9]{70,}={0,3})",
    from: "gitleaks:grafana-service-account-token, grafana-cloud-api-token, grafana-api-key",
  },
  {
    kind: "new-relic-key",
    keywords: ["NRAK-", "NRII-", "NRJS-"],
    source: `NR(?:AK|II|JS)-[A-Za-z0-9]{19,32}${END}`,
    from: "gitleaks:new-relic-user-api-key, new-relic-insert-key, new-relic-browser-api-token",
  },
  { kind: "perplexity-key", keywords: ["pplx-"], source: `pplx-[A-Za-z0-9]{48}${END}`, from: "gitleaks:perplexity-api-key" },
  { kind: "groq-key", keywords: ["gsk_"], source: `gsk_[A-Za-z0-9]{52}${END}`, from: "GitHub partner list (groq_api_key)" },
  { kind: "age-secret-key", keywords: ["AGE-SECRET-KEY-1"], source: "AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", from: "gitleaks:age-secret-key" },
  { kind: "1password-token", keywords: ["ops_eyJ"], source: "ops_eyJ[A-Za-z0-9+/]{100,}={0,3}", from: "gitleaks:1password-service-account-token" },
  {
    kind: "square-token",
    keywords: ["sq0atp-", "sq0csp-", "EAAA"],
    source: `(?:sq0atp-|sq0csp-|EAAA)[A-Za-z0-9_-]{22,60}${END}`,
    from: "gitleaks:square-access-token; GitHub partner list (square_access_token, square_production_application_secret)",
  },
  { kind: "alibaba-key", keywords: ["LTAI"], source: `LTAI[A-Za-z0-9]{20}${END}`, from: "gitleaks:alibaba-access-key-id" },
  {
    kind: "azure-storage-key",
    keywords: ["AccountKey=", "SharedAccessKey="],
    source: "(?:AccountKey|SharedAccessKey)=([A-Za-z0-9+/]{40,}={0,2})",
    from: 'Azure Storage docs "Configure a connection string"; Service Bus "SAS" connection strings; GitHub partner list (azure_storage_account_key)',
  },
  {
    kind: "azure-sas",
    keywords: ["sig="],
    source: "(?<=[?&;])sig=([A-Za-z0-9%+/=_-]{16,})",
    from: 'Azure Storage docs "Grant limited access with shared access signatures" (the sig parameter)',
  },
  {
    kind: "aws-access-key-id",
    keywords: ["AKIA", "ASIA", "ABIA", "ACCA", "A3T"],
    source: `(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}${END}`,
    from: 'gitleaks:aws-access-token; AWS IAM User Guide "Unique identifiers"',
  },
  {
    kind: "jwt",
    keywords: ["eyJ"],
    source: "eyJ[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]*",
    from: "gitleaks:jwt; RFC 7519 (a JOSE header and claims set are base64url JSON objects, so both start eyJ)",
  },
  {
    kind: "url-password",
    keywords: ["://"],
    // scheme://user:PASSWORD@host: the scheme, user and host stay readable.
    source: "(?<=\\b[a-zA-Z][a-zA-Z0-9+.-]{0,20})://[^\\s:/?#@\"'<>\\\\]*:([^\\s/?#@\"'<>\\\\]{1,200})(?=@[^\\s/?#@\"'<>\\\\])",
    from: "RFC 3986 §3.2.1 (userinfo); gitleaks:curl-auth-user, sidekiq-sensitive-url",
    // `http://allowed.test:80@other.test/` is a port trick, not a password.
    accept: (secret) => notPlaceholder(secret) && !/^[0-9]{1,5}$/.test(secret),
  },
  {
    kind: "curl-user-password",
    keywords: ["-u ", "-u=", "--user ", "--user="],
    source: "(?<=(?:^|[^A-Za-z0-9_]|\\\\[nrt])curl[ \\t][^\\n]{0,200}\\s)(?:-u|--user)[ =]['\"]?[^\\s:'\"]{1,100}:([^\\s'\"]{3,200})",
    from: "gitleaks:curl-auth-user",
    accept: (secret) => notPlaceholder(secret) && !/^[0-9]+$/.test(secret),
  },
  {
    kind: "basic-auth",
    keywords: AUTHORIZATION,
    source: "[Aa]uthorization[\"']?[ \\t]*[:=][ \\t]*[\"']?[Bb]asic[ \\t]+([A-Za-z0-9+/]{8,}={0,2})",
    from: "RFC 7617 (Basic authentication); gitleaks:curl-auth-header",
  },
  {
    kind: "bearer-token",
    keywords: ["Bearer", "BEARER", ...AUTHORIZATION],
    source: `(?:[Aa]uthorization["']?[ \\t]*[:=][ \\t]*["']?)?(?:[Bb]earer|BEARER)[ \\t]+((?=${B64}*[0-9])${B64}{16,}=*)`,
    from: "RFC 6750 §2.1 (b64token of 16+ characters with a digit; the word Bearer is kept)",
  },
];
