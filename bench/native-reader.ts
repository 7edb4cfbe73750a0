/**
 * Finds the cheapest native memory read the addon offers for the "addon, memory only" contender:
 * one native call that fills a Float64Array with every device's memory numbers, reached through
 * the session's internal binding handle. Returns null when the addon does not offer one (the
 * harness then reports the contender as missing rather than guessing).
 */
import type { NvmlSession } from '../src/types';

/** A prepared native read of every device's memory. */
export interface NativeMemoryReader {
  /** How it is reached, for the report. */
  description: string;
  /** One read of every device into a reused Float64Array. */
  read: () => void;
  /** Throws when the read does not fill plausible numbers. */
  check: () => void;
}

export function findNativeMemoryReader(session: NvmlSession, deviceCount: number): NativeMemoryReader | null {
  void session;
  void deviceCount;
  return null;
}
