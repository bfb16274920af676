/** `value` as one POSIX shell word: single-quoted, each `'` written `'\''`, so nothing in it is expanded or run. */
export function shellWord(value: string): string {
  return `'${value.replaceAll("'", "'\\''")}'`;
}
