import { describe, expect, it } from "vitest";
import { excerptOutput, joinExcerpt } from "../../src/events/output-excerpt.js";

describe("excerptOutput: the start and the end of a long output", () => {
  it("a short output is all tail", () => {
    expect(excerptOutput("abc", 2, 5)).toEqual({ head: "", tail: "abc", omitted: 0 });
  });

  it("an output a little longer than the tail: the head is what the tail does not hold, nothing is left out", () => {
    const excerpt = excerptOutput("0123456789", 4, 7);
    expect(excerpt).toEqual({ head: "012", tail: "3456789", omitted: 0 });
    expect(joinExcerpt({ output_head: excerpt.head, output_tail: excerpt.tail, output_omitted: excerpt.omitted })).toBe("0123456789");
  });

  it("a long output: head, the count left out, tail", () => {
    const excerpt = excerptOutput("0123456789", 2, 3);
    expect(excerpt).toEqual({ head: "01", tail: "789", omitted: 5 });
    expect(joinExcerpt({ output_head: excerpt.head, output_tail: excerpt.tail, output_omitted: excerpt.omitted })).toBe("01\n[… 5 characters left out …]\n789");
  });

  it("a record written before heads were kept reads as its tail", () => {
    expect(joinExcerpt({ output_tail: "1 failed" })).toBe("1 failed");
  });
});
