/** `--name=value` from the command line, or undefined. */
export function option(name: string): string | undefined {
  const prefix = `--${name}=`;
  return process.argv
    .slice(2)
    .find((argument) => argument.startsWith(prefix))
    ?.slice(prefix.length);
}

/** A positive number option (`integer`: whole numbers only), or `fallback` when absent; throws naming the flag otherwise. */
export function positiveOption(name: string, fallback: number, { integer = true } = {}): number {
  const raw = option(name);
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!(value > 0) || (integer && !Number.isInteger(value))) throw new Error(`--${name} must be a positive ${integer ? "integer" : "number"}`);
  return value;
}
