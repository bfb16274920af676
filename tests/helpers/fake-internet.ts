/**
 * A "fake internet" for the egress tests and benchmarks: a Docker network the
 * test creates (internal, so nothing on it can reach anything the test did not
 * start) with tiny HTTP servers the test starts, reachable by network aliases
 * such as `allowed.test`. The egress proxy of a task is attached to it
 * (`DockerSandboxProvider({ egressNetwork })`) and resolves those aliases
 * through Docker's embedded DNS; nothing here ever talks to another address.
 *
 * Every server listens on 80, 443 and 8443 (plain HTTP on all three: an HTTPS
 * client reaches 443 through a CONNECT tunnel, which is what the proxy sees),
 * serves `/` as `hello-from-<name>`, and logs each request as
 * `<client ip> "<request line>" <status>` on stderr, so a test can show that a
 * request never arrived. With `packageIndexes`, it also serves a bare git
 * repository (`/repo.git`, dumb HTTP), a PEP 503 simple index (`/simple/`) and
 * an npm packument (`/npm/tiny-pkg`), each for one package `tiny-pkg` 1.0.0.
 */
import type Docker from "dockerode";

/** Marks every resource of a fake internet (never the runner's run-id label: the runner's sweep would take them). */
export const FAKE_INTERNET_LABEL = "dev.agent-runner.test.fake-internet";

export interface FakeServerSpec {
  /** Network aliases; the first is the server's name (and its `/` body). */
  aliases: string[];
  /** Also serve the git / pip / npm fixtures. */
  packageIndexes?: boolean;
}

export interface FakeServer {
  name: string;
  aliases: string[];
  container: Docker.Container;
  /** IPv4 address on the fake network. */
  ip: string;
  /** The request log so far (stderr of the server). */
  log(): Promise<string>;
}

export interface ClientResult {
  exitCode: number;
  output: string;
}

export interface FakeInternet extends AsyncDisposable {
  /** Docker network name (pass as `egressNetwork`). */
  network: string;
  /** e.g. 172.25.0.0/16: the range a task lists in `allow_cidrs` to let allowed names resolve here. */
  subnet: string;
  servers: Map<string, FakeServer>;
  server(name: string): FakeServer;
  /** Runs `bash -c command` in a throwaway container on the fake network (a client that is not a sandbox). */
  runClient(command: string, image?: string): Promise<ClientResult>;
  remove(): Promise<void>;
}

const SERVER_SCRIPT = String.raw`
import http.server, sys, threading
class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory="/srv", **kwargs)
    def log_message(self, format, *args):
        sys.stderr.write("%s %s\n" % (self.client_address[0], format % args))
        sys.stderr.flush()
for port in (80, 443, 8443):
    server = http.server.ThreadingHTTPServer(("0.0.0.0", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
print("ready", flush=True)
threading.Event().wait()
`;

function serverSetup(name: string, packageIndexes: boolean): string {
  const lines = ["set -e", "mkdir -p /srv", `printf 'hello-from-%s\\n' '${name}' > /srv/index.html`];
  if (packageIndexes) {
    const packument = JSON.stringify({
      name: "tiny-pkg",
      "dist-tags": { latest: "1.0.0" },
      versions: {
        "1.0.0": {
          name: "tiny-pkg",
          version: "1.0.0",
          dist: { tarball: `http://${name}/npm/tiny-pkg-1.0.0.tgz`, shasum: "0000000000000000000000000000000000000000" },
        },
      },
    });
    lines.push(
      "git -c init.defaultBranch=main init -q /tmp/work",
      "git -C /tmp/work -c user.name=t -c user.email=t@t.test commit -q --allow-empty -m tiny",
      "git clone -q --bare /tmp/work /srv/repo.git",
      "git -C /srv/repo.git update-server-info",
      "mkdir -p /srv/simple/tiny-pkg /srv/npm",
      `printf '<html><body><a href="/files/tiny_pkg-1.0.0.tar.gz">tiny_pkg-1.0.0.tar.gz</a></body></html>\\n' > /srv/simple/tiny-pkg/index.html`,
      `printf '<html><body><a href="/simple/tiny-pkg/">tiny-pkg</a></body></html>\\n' > /srv/simple/index.html`,
      `cat > /srv/npm/tiny-pkg <<'JSON'\n${packument}\nJSON`,
    );
  }
  lines.push(`exec python3 -c '${SERVER_SCRIPT.replace(/'/g, `'"'"'`)}'`);
  return lines.join("\n");
}

/** Docker multiplexes stdout/stderr (8-byte frame headers) when there is no TTY. */
export function demultiplex(buffer: Buffer): string {
  const parts: Buffer[] = [];
  let offset = 0;
  while (offset + 8 <= buffer.length) {
    const size = buffer.readUInt32BE(offset + 4);
    parts.push(buffer.subarray(offset + 8, offset + 8 + size));
    offset += 8 + size;
  }
  return Buffer.concat(parts).toString("utf8");
}

async function logsOf(container: Docker.Container, stdout: boolean, stderr: boolean): Promise<string> {
  const raw = (await container.logs({ stdout, stderr, follow: false })) as unknown as Buffer;
  return demultiplex(raw);
}

/**
 * Creates the network and starts the servers (in parallel); resolves when every
 * server listens. On failure removes what it made. `id` goes into names and the label.
 */
export async function createFakeInternet(docker: Docker, options: { id: string; image: string; servers: FakeServerSpec[] }): Promise<FakeInternet> {
  const networkName = `fake-internet-${options.id}`;
  const labels = { [FAKE_INTERNET_LABEL]: options.id };
  const network = await docker.createNetwork({ Name: networkName, Driver: "bridge", Internal: true, CheckDuplicate: true, Labels: labels });
  const servers = new Map<string, FakeServer>();
  const clients = new Set<Docker.Container>();

  const remove = async () => {
    const containers = await docker.listContainers({ all: true, filters: { label: [`${FAKE_INTERNET_LABEL}=${options.id}`] } });
    await Promise.all(
      containers.map((info) =>
        docker
          .getContainer(info.Id)
          .remove({ force: true })
          .catch(() => undefined),
      ),
    );
    for (let attempt = 0; ; attempt += 1) {
      try {
        await network.remove();
        return;
      } catch (error) {
        const status = (error as { statusCode?: number }).statusCode;
        if (status === 404) return;
        // An egress proxy still attached (a sandbox not yet closed) keeps the network busy for a moment.
        if (attempt >= 20) throw error;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
  };

  try {
    await Promise.all(
      options.servers.map(async (spec) => {
        const name = spec.aliases[0]!;
        const container = await docker.createContainer({
          name: `${networkName}-${name.replace(/[^a-z0-9]+/g, "-")}`,
          Image: options.image,
          Entrypoint: [],
          Cmd: ["bash", "-c", serverSetup(name, spec.packageIndexes ?? false)],
          Labels: labels,
          HostConfig: { NetworkMode: networkName, Memory: 128 * 1024 * 1024, PidsLimit: 64 },
          NetworkingConfig: { EndpointsConfig: { [networkName]: { Aliases: spec.aliases } } },
        });
        await container.start();
        const deadline = Date.now() + 30_000;
        while (!(await logsOf(container, true, false)).includes("ready")) {
          const state = (await container.inspect()).State;
          if (!state.Running) throw new Error(`fake server ${name} exited: ${await logsOf(container, true, true)}`);
          if (Date.now() > deadline) throw new Error(`fake server ${name} did not start within 30 s`);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
        const ip = (await container.inspect()).NetworkSettings.Networks[networkName]!.IPAddress;
        servers.set(name, { name, aliases: spec.aliases, container, ip, log: () => logsOf(container, false, true) });
      }),
    );
  } catch (error) {
    await remove().catch(() => undefined);
    throw error;
  }
  const subnet = ((await network.inspect()) as Docker.NetworkInspectInfo).IPAM!.Config![0]!.Subnet!;

  return {
    network: networkName,
    subnet,
    servers,
    server(name) {
      const server = servers.get(name);
      if (!server) throw new Error(`no fake server ${name}`);
      return server;
    },
    async runClient(command, image = options.image) {
      const container = await docker.createContainer({
        Image: image,
        Entrypoint: [],
        Cmd: ["bash", "-c", command],
        Labels: labels,
        HostConfig: { NetworkMode: networkName, CapDrop: ["ALL"], SecurityOpt: ["no-new-privileges"] },
      });
      clients.add(container);
      try {
        await container.start();
        const { StatusCode } = (await container.wait()) as { StatusCode: number };
        return { exitCode: StatusCode, output: await logsOf(container, true, true) };
      } finally {
        await container.remove({ force: true }).catch(() => undefined);
        clients.delete(container);
      }
    },
    remove,
    [Symbol.asyncDispose]: remove,
  };
}
