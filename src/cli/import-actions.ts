import { importHarbor, importTerminalBench1 } from "../importers/benchmark-dirs.js";
import { importSweBench } from "../importers/swe-bench.js";
import { formatImportLine, type ImportLine } from "../importers/task-writer.js";
import { terminalSafe } from "../terminal-text.js";

export async function importSweBenchAction(instances: string, flags: { repos: string; out: string; image?: string; shallow?: boolean }): Promise<number> {
  return report(
    await importSweBench(instances, { repos: flags.repos, out: flags.out, ...(flags.image ? { image: flags.image } : {}), shallow: flags.shallow ?? false }),
  );
}

export async function importDirectoriesAction(kind: "harbor" | "tb1", input: string, flags: { out: string }): Promise<number> {
  return report(kind === "harbor" ? await importHarbor(input, flags.out) : await importTerminalBench1(input, flags.out));
}

function report(lines: ImportLine[]): number {
  for (const line of lines) process.stdout.write(`${terminalSafe(formatImportLine(line))}\n`);
  const converted = lines.filter((line) => line.converted).length;
  process.stdout.write(`${converted} of ${lines.length} converted\n`);
  return converted === lines.length ? 0 : 1;
}
