/**
 * Headless Chromium for the report tests: Debian's `chromium` package
 * (scripts/ensure-test-deps.sh installs it), driven by playwright-core over
 * CDP. Never a browser download: playwright-core has none of its own and is
 * pointed at /usr/bin/chromium. Like Docker for the integration tests, a
 * missing browser fails the test (it never skips).
 */
import { existsSync } from "node:fs";
import { chromium, type Browser } from "playwright-core";
import { PNG } from "pngjs";

const CHROMIUM = process.env.RUNNER_TEST_CHROMIUM ?? "/usr/bin/chromium";

/** Launches headless Chromium (no sandbox of its own: the tests run as root in CI, where Chromium refuses its sandbox). */
export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM))
    throw new Error(`this needs Debian's chromium at ${CHROMIUM} (apt-get install chromium; \`make test-deps\` runs scripts/ensure-test-deps.sh, which does)`);
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: ["--no-sandbox", "--disable-gpu"] });
}

/** An RGB colour as `#rrggbb`. */
export type Hex = `#${string}`;

/** The colour of pixel (x, y), CSS pixels at device scale 1, of a PNG screenshot. */
export function pixelAt(png: Buffer, x: number, y: number): Hex {
  const image = PNG.sync.read(png);
  const index = (Math.round(y) * image.width + Math.round(x)) * 4;
  const hex = (value: number) => value.toString(16).padStart(2, "0");
  return `#${hex(image.data[index]!)}${hex(image.data[index + 1]!)}${hex(image.data[index + 2]!)}`;
}

/** Largest difference of one channel between two colours, 0..255 (anti-aliasing and colour management move a channel by a few). */
export function colourDistance(a: Hex, b: Hex): number {
  const channels = (hex: Hex) => [1, 3, 5].map((offset) => Number.parseInt(hex.slice(offset, offset + 2), 16));
  const [left, right] = [channels(a), channels(b)];
  return Math.max(...left.map((value, index) => Math.abs(value - right[index]!)));
}
