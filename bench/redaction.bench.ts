/**
 * What issue 20's redaction changes cost (items 4 and 5), no Docker:
 *
 * - `records`: redacting 1 MB of tool output (source code and logs) with the
 *   credential shapes only (baseline), with one secret (the value, its JSON
 *   escapes and, new, its base64/base64url forms at three offsets, hex and
 *   percent-encodings), and with eight secrets (a CI job's tokens, which the
 *   runner now registers by their names);
 * - `stream`: a 20 KB reply streamed in 8-character pieces (the scripted
 *   model's piece size) shown live: appending only (baseline), through
 *   StreamedTextRedactor, and redacting the whole text at every piece (what
 *   the geometric re-redaction avoids).
 *
 *   npx tsx bench/redaction.bench.ts [--rounds=20]
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Redactor } from "../src/redaction/redactor.js";
import { StreamedTextRedactor } from "../src/redaction/streamed-text.js";
import { positiveOption } from "./lib/options.js";
import { interleave, printTable } from "./lib/stats.js";

const rounds = positiveOption("rounds", 20);
const root = join(import.meta.dirname, "..");
const source = ["src/redaction/redactor.ts", "src/model/openai-model-client.ts", "README.md"].map((path) => readFileSync(join(root, path), "utf8")).join("\n");
let output = "";
while (output.length < 1_000_000) output += source;
output = output.slice(0, 1_000_000);

const secret = (index: number) => `ci-token-${index}-${"Zq7xW2".repeat(4)}`;
const shapes = new Redactor();
const one = new Redactor([{ name: "TOKEN_0", value: secret(0) }]);
const eight = new Redactor(Array.from({ length: 8 }, (_, index) => ({ name: `TOKEN_${index}`, value: secret(index) })));

const records = await interleave(
  {
    "shapes only": async () => shapes.redact(output),
    "1 secret, encoded forms": async () => one.redact(output),
    "8 secrets, encoded forms": async () => eight.redact(output),
  },
  rounds,
);
printTable("redact 1 MB of tool output", [
  { name: "shapes only", samples: records["shapes only"]! },
  { name: "1 secret, encoded forms", samples: records["1 secret, encoded forms"]!, baseline: "shapes only", note: `${one.literalCount} literal forms` },
  { name: "8 secrets, encoded forms", samples: records["8 secrets, encoded forms"]!, baseline: "shapes only", note: `${eight.literalCount} literal forms` },
]);

const reply = source.slice(0, 20_000);
const pieces: string[] = [];
for (let index = 0; index < reply.length; index += 8) pieces.push(reply.slice(index, index + 8));
const stream = await interleave(
  {
    "append only": async () => {
      let text = "";
      for (const piece of pieces) text += piece;
      return text;
    },
    StreamedTextRedactor: async () => {
      const redactor = new StreamedTextRedactor(one);
      for (const piece of pieces) redactor.append(piece);
    },
    "redact whole text per piece": async () => {
      let text = "";
      for (const piece of pieces) one.redact((text += piece));
    },
  },
  Math.max(3, Math.floor(rounds / 4)),
  1,
);
printTable(`a 20 KB reply in ${pieces.length} pieces of 8 characters`, [
  { name: "append only", samples: stream["append only"]! },
  { name: "StreamedTextRedactor", samples: stream.StreamedTextRedactor!, baseline: "append only" },
  { name: "redact whole text per piece", samples: stream["redact whole text per piece"]!, baseline: "StreamedTextRedactor" },
]);
