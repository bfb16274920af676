import { readFileSync } from "node:fs";
import { connect, credsAuthenticator, nkeyAuthenticator, type NatsConnection, type NodeConnectionOptions } from "@nats-io/transport-node";
import { ConfigError, errorMessage } from "../errors.js";

/**
 * How a worker or a submitter reaches NATS (docs/scale-out.md "Accounts and
 * credentials"). Every credential comes from the process environment or a
 * file it names, never from a flag (flags show in `ps`):
 *
 * | variable | meaning |
 * | --- | --- |
 * | `RUNNER_NATS_USER`, `RUNNER_NATS_PASSWORD` (or `RUNNER_NATS_PASSWORD_FILE`) | user/password authentication |
 * | `RUNNER_NATS_NKEY_FILE` (or `RUNNER_NATS_NKEY`) | an nkey seed (`SU…`): nkey authentication |
 * | `RUNNER_NATS_CREDS_FILE` | a `.creds` file (JWT + seed) of an operator-mode account |
 * | `RUNNER_NATS_CA`, `RUNNER_NATS_CERT`, `RUNNER_NATS_KEY` | TLS: the CA bundle, and a client certificate and key (PEM files); any of them turns TLS on |
 */
export interface NatsSettings {
  /** Seed URLs: `nats://host:port`, several comma-separated. */
  servers: string[];
  /** The client name the server's monitoring shows (`connz`). */
  name: string;
  environment: NodeJS.ProcessEnv;
}

/**
 * `--nats nats://h:p[,h:p…]` as seed URLs. Throws ConfigError naming the flag
 * when a seed is not a `nats://` or `tls://` URL with a host and port.
 */
export function parseNatsServers(value: string, flag = "--nats"): string[] {
  const servers = value
    .split(",")
    .map((server) => server.trim())
    .filter(Boolean);
  if (servers.length === 0) throw new ConfigError(`${flag}: expected nats://host:port[,host:port…], got ${JSON.stringify(value)}`);
  return servers.map((server) => {
    const url = /^[a-z]+:\/\//.test(server) ? server : `nats://${server}`;
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new ConfigError(`${flag}: ${JSON.stringify(server)} is not a URL; expected nats://host:port`);
    }
    if (!["nats:", "tls:"].includes(parsed.protocol) || !parsed.hostname || !parsed.port) {
      throw new ConfigError(`${flag}: ${JSON.stringify(server)} must be nats://host:port (or tls://host:port)`);
    }
    if (parsed.username || parsed.password) {
      throw new ConfigError(
        `${flag}: ${server.replace(/\/\/[^@]*@/, "//…@")} carries credentials; set RUNNER_NATS_USER and RUNNER_NATS_PASSWORD instead (docs/scale-out.md)`,
      );
    }
    return url;
  });
}

/**
 * The connect options the environment asks for (see {@link NatsSettings}).
 * Throws ConfigError naming the variable when a named file cannot be read or
 * two authentication methods are given at once.
 */
export function natsConnectionOptions(settings: NatsSettings): NodeConnectionOptions {
  const environment = settings.environment;
  const file = (variable: string): string | undefined => {
    const path = environment[variable];
    if (!path) return undefined;
    try {
      return readFileSync(path, "utf8").trim();
    } catch (error) {
      throw new ConfigError(`${variable}: cannot read ${path}: ${errorMessage(error)}`);
    }
  };
  const user = environment.RUNNER_NATS_USER;
  const password = environment.RUNNER_NATS_PASSWORD ?? file("RUNNER_NATS_PASSWORD_FILE");
  const seed = environment.RUNNER_NATS_NKEY ?? file("RUNNER_NATS_NKEY_FILE");
  const creds = file("RUNNER_NATS_CREDS_FILE");
  const methods = [user ? "RUNNER_NATS_USER" : null, seed ? "RUNNER_NATS_NKEY(_FILE)" : null, creds ? "RUNNER_NATS_CREDS_FILE" : null].filter(Boolean);
  if (methods.length > 1) throw new ConfigError(`NATS credentials: give one way to authenticate, not ${methods.join(" and ")}`);
  if (password && !user) throw new ConfigError("RUNNER_NATS_PASSWORD: set RUNNER_NATS_USER too (the password belongs to a user)");
  const options: NodeConnectionOptions = { servers: settings.servers, name: settings.name, maxReconnectAttempts: -1 };
  if (user) Object.assign(options, { user, pass: password ?? "" });
  if (seed) options.authenticator = nkeyAuthenticator(new TextEncoder().encode(seed));
  if (creds) options.authenticator = credsAuthenticator(new TextEncoder().encode(creds));
  const [caFile, certFile, keyFile] = [environment.RUNNER_NATS_CA, environment.RUNNER_NATS_CERT, environment.RUNNER_NATS_KEY];
  if (caFile || certFile || keyFile || settings.servers.some((server) => server.startsWith("tls://"))) {
    if (Boolean(certFile) !== Boolean(keyFile)) throw new ConfigError("RUNNER_NATS_CERT and RUNNER_NATS_KEY: give both (a client certificate needs its key)");
    options.tls = { ...(caFile ? { caFile } : {}), ...(certFile ? { certFile } : {}), ...(keyFile ? { keyFile } : {}) };
  }
  return options;
}

/**
 * Connects to the first seed that answers and keeps reconnecting (to any
 * server of the cluster) for as long as the connection is open. Rejects,
 * naming the seeds, when none answers; ConfigError for bad credentials
 * settings ({@link natsConnectionOptions}).
 */
export async function connectNats(settings: NatsSettings): Promise<NatsConnection> {
  const options = natsConnectionOptions(settings);
  try {
    return await connect(options);
  } catch (error) {
    throw new Error(`cannot reach NATS at ${settings.servers.join(",")}: ${errorMessage(error)}`, { cause: error });
  }
}
