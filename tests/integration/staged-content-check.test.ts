/**
 * The host commit's defence in depth: after `git add`, what git staged is read
 * again from the worktree without following symlinks; a tree that changed
 * under host git (a directory swapped for a symlink to a host directory, the
 * race the container's removal before the commit closes) refuses the commit.
 * Real git, no Docker: the swap is made by the test between add and check.
 */
import { mkdirSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { rawSafeGit } from "../../src/workspace/safe-git.js";
import { checkStagedContent, StagedContentMismatchError } from "../../src/workspace/staged-content-check.js";
import { createGitRepository, temporaryDirectory } from "../helpers/git-repository.js";

function gitOptions(root: string) {
  return { baseDirectory: root, gitDirectory: join(root, ".git"), workTree: root };
}

describe("checkStagedContent (real git)", () => {
  it("accepts what git staged when the worktree still backs it: files, symlinks, CRLF under eol attributes, non-UTF-8 names", async () => {
    await using repository = createGitRepository({ "a.txt": "a\n", ".gitattributes": "*.txt text eol=lf\n" });
    mkdirSync(join(repository.root, "dir"));
    writeFileSync(join(repository.root, "dir", "b.txt"), "one\r\ntwo\r\n");
    symlinkSync("../a.txt", join(repository.root, "dir", "link"));
    writeFileSync(Buffer.from(join(repository.root, "caf\xe9.bin"), "latin1"), Buffer.from([0, 1, 2]));
    await rawSafeGit(gitOptions(repository.root), ["add", "--all"]);
    await expect(checkStagedContent(gitOptions(repository.root))).resolves.toBeUndefined();
  });

  it("refuses when a staged path now goes through a symlink, or its bytes differ", async () => {
    await using repository = createGitRepository({ "a.txt": "a\n" });
    await using host = temporaryDirectory("agent-runner-host-");
    writeFileSync(join(host.path, "secret.txt"), "host secret\n");
    mkdirSync(join(repository.root, "d"));
    writeFileSync(join(repository.root, "d", "secret.txt"), "decoy\n");
    await rawSafeGit(gitOptions(repository.root), ["add", "--all"]);
    // The swap a hostile process would make while host git hashes the tree.
    renameSync(join(repository.root, "d"), join(repository.root, "d.real"));
    symlinkSync(host.path, join(repository.root, "d"));
    await expect(checkStagedContent(gitOptions(repository.root))).rejects.toThrow(StagedContentMismatchError);
    await expect(checkStagedContent(gitOptions(repository.root))).rejects.toThrow(/"d" is a symlink/);
    // Swapped back, but with other bytes than git read.
    rmSync(join(repository.root, "d"));
    renameSync(join(repository.root, "d.real"), join(repository.root, "d"));
    writeFileSync(join(repository.root, "d", "secret.txt"), "other\n");
    await expect(checkStagedContent(gitOptions(repository.root))).rejects.toThrow(/hash differently/);
  });
});
