import { StringDecoder } from "node:string_decoder";
import type { ApprovalAnswer } from "./approval.js";

export interface ApprovalPromptOptions {
  /** Where answers are typed (a TTY's stdin; a PassThrough in tests). Paused again afterwards; never closed. */
  input: NodeJS.ReadableStream;
  /** Where the question goes (stderr: stdout may carry --json events). */
  output: NodeJS.WritableStream;
  question: string;
  /** Offer `a` (always, for the rest of this run). */
  canRemember: boolean;
  /** No answer within this many milliseconds answers no. */
  timeoutMs: number;
  /** Aborting (Ctrl-C) answers no at once. */
  signal?: AbortSignal;
}

const MAX_ATTEMPTS = 3;

/**
 * Asks one approval question and reads one answer line: `y`/`yes`,
 * `n`/`no` optionally followed by a reason (`n use the test database`), or
 * `a`/`always` when offered. Anything else is asked again, at most three
 * times, then counts as no; end of input, the timeout and the abort signal
 * answer no as well.
 */
export function promptForApproval(options: ApprovalPromptOptions): Promise<ApprovalAnswer> {
  const { input, output, question, canRemember, timeoutMs, signal } = options;
  const choices = `[y]es / [n]o [reason]${canRemember ? " / [a]lways for this run" : ""}`;
  return new Promise<ApprovalAnswer>((resolve) => {
    const decoder = new StringDecoder("utf8");
    let buffered = "";
    let attempts = 0;
    let settled = false;

    const finish = (answer: ApprovalAnswer) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      input.removeListener("data", onData);
      input.removeListener("end", onEnd);
      signal?.removeEventListener("abort", onAbort);
      input.pause();
      resolve(answer);
    };
    const ask = (hint?: string) => output.write(`${hint ? `${hint}\n` : ""}${question}\nAllow? ${choices}: `);
    const onLine = (line: string) => {
      const answer = parseAnswer(line, canRemember);
      if (answer) {
        finish(answer);
        return;
      }
      attempts += 1;
      if (attempts >= MAX_ATTEMPTS) {
        output.write("\nno valid answer; refusing\n");
        finish({ answer: "no", reason: "no valid answer" });
        return;
      }
      ask(`please answer y, n [reason]${canRemember ? " or a" : ""} (got ${JSON.stringify(line.trim())})`);
    };
    const onData = (chunk: Buffer | string) => {
      buffered += typeof chunk === "string" ? chunk : decoder.write(chunk);
      let newline = buffered.indexOf("\n");
      while (newline !== -1 && !settled) {
        const line = buffered.slice(0, newline).replace(/\r$/, "");
        buffered = buffered.slice(newline + 1);
        onLine(line);
        newline = buffered.indexOf("\n");
      }
    };
    const onEnd = () => {
      output.write("\n");
      finish({ answer: "no", reason: "input closed before an answer" });
    };
    const onAbort = () => {
      output.write("\n");
      finish({ answer: "no", reason: "cancelled" });
    };
    const timer = setTimeout(() => {
      output.write(`\nno answer within ${timeoutMs < 1000 ? `${timeoutMs} ms` : `${Math.round(timeoutMs / 1000)} s`}; refusing\n`);
      finish({ answer: "no", timedOut: true });
    }, timeoutMs);

    if (signal?.aborted) {
      onAbort();
      return;
    }
    signal?.addEventListener("abort", onAbort, { once: true });
    input.on("data", onData);
    input.on("end", onEnd);
    input.resume();
    ask();
  });
}

function parseAnswer(line: string, canRemember: boolean): ApprovalAnswer | null {
  const match = /^\s*(\S+)\s*(.*?)\s*$/.exec(line);
  if (!match) return null;
  const word = match[1]!.toLowerCase();
  const rest = match[2]!;
  if ((word === "y" || word === "yes") && rest === "") return { answer: "yes" };
  if (word === "n" || word === "no") return rest === "" ? { answer: "no" } : { answer: "no", reason: rest };
  if (canRemember && (word === "a" || word === "always") && rest === "") return { answer: "always" };
  return null;
}
