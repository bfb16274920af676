import { statfs } from "node:fs/promises";

/**
 * Bytes in use on the filesystem holding `path`, bytes an unprivileged writer
 * still has, free inodes (files that can still be made), and whether it is full; reads only the filesystem's counters (statfs).
 */
export async function filesystemUsage(path: string): Promise<{ usedBytes: number; availableBytes: number; availableFiles: number; full: boolean }> {
  const stats = await statfs(path);
  return {
    usedBytes: (stats.blocks - stats.bfree) * stats.bsize,
    availableBytes: stats.bavail * stats.bsize,
    availableFiles: stats.ffree,
    full: stats.bavail * stats.bsize < FULL_MARGIN_BYTES || stats.ffree === 0,
  };
}

/** Free space below which a filesystem counts as full: a write refused with ENOSPC leaves less than this (a few blocks). */
const FULL_MARGIN_BYTES = 1024 * 1024;
