/**
 * The encoded forms of a literal secret that the {@link Redactor} searches
 * for besides the value itself, so that a secret a tool printed encoded is
 * redacted too (gitleaks decodes base64, hex and percent-encoding before
 * matching, `--max-decode-depth`; GitHub Actions' log masker registers the
 * base64 forms of each secret at the three byte offsets, which is what this
 * does, because a literal search stays one pass over the text where decoding
 * every candidate run would not):
 *
 * - base64 (RFC 4648 §4) and base64url (§5) of the UTF-8 bytes, at each of
 *   the three offsets the secret can start at inside a longer encoded text:
 *   the characters that depend on the secret's bytes alone (one or two
 *   characters at either end, shared with the bytes around it, stay);
 * - hex (either case: the literal search ignores case);
 * - percent-encoding (RFC 3986 §2.1): `encodeURIComponent`'s, its form
 *   encoding (`+` for a space), and every byte encoded (`%41%42…`).
 *
 * Not found: encodings nested in each other (base64 of hex), base64 broken
 * across lines (MIME's 76 columns), other encodings (UTF-16, gzip, a
 * cipher). Forms equal to the value are left out.
 */
export function encodedForms(value: string): string[] {
  const bytes = Buffer.from(value, "utf8");
  const forms = new Set<string>();
  for (let offset = 0; offset < 3; offset++) {
    const encoded = Buffer.concat([Buffer.alloc(offset), bytes]).toString("base64");
    // Character i holds bits [6i, 6i + 6); the secret's bits are [8 * offset, 8 * (offset + length)).
    const core = encoded.slice(Math.ceil((8 * offset) / 6), Math.floor((8 * (offset + bytes.length)) / 6));
    forms.add(core).add(core.replace(/\+/g, "-").replace(/\//g, "_"));
  }
  forms.add(bytes.toString("hex"));
  const percent = encodeURIComponent(value);
  forms.add(percent).add(percent.replace(/%20/g, "+"));
  forms.add([...bytes].map((byte) => `%${byte.toString(16).padStart(2, "0")}`).join(""));
  forms.delete(value);
  return [...forms];
}
