/**
 * The addon's wire layout, resolved once: for each record kind of the flat snapshot encoding
 * (and of readMemory's output), the position of every slot the decoder reads. The addon names
 * its slots in order (native/wire_layout.h, exported by encodingLayout()); this module holds the
 * names TypeScript reads and nothing about their positions, so a slot moved or added on the native
 * side needs no change here. A name the addon lacks (a stale build) is refused at load.
 */
import type { NativeBinding, NativeWireLayout } from './native-binding';

/** The slot names the decoder reads, per record kind. */
export const WIRE_SLOT_NAMES = {
  header: ['deviceCount'],
  device: [
    'index',
    'memTotal',
    'memFree',
    'memUsed',
    'memReserved',
    'memSource',
    'persistence',
    'computeMode',
    'migMode',
    'utilGpu',
    'utilMemory',
    'temperatureC',
    'powerMilliwatts',
    'errorCode',
    'errorSymbol',
    'errorMessage',
    'fieldErrorCount',
    'processCount',
    'processSymbol',
    'processStride',
    'migCount',
  ],
  mig: [
    'slot',
    'uuid',
    'gpuInstanceId',
    'computeInstanceId',
    'memTotal',
    'memFree',
    'memUsed',
    'memReserved',
    'memSource',
    'errorCode',
    'errorSymbol',
    'errorMessage',
    'errorField',
    'processCount',
    'processStride',
  ],
  error: ['field', 'nvmlReturn', 'symbol', 'message'],
  process: ['pid', 'usedBytes', 'kinds', 'gpuInstanceId', 'computeInstanceId'],
  memory: ['totalBytes', 'freeBytes', 'usedBytes', 'reservedBytes', 'nvmlReturn'],
} as const;

/** The process kinds the `kinds` bitmask can name (bit i = the addon's processKinds[i]). */
export const WIRE_PROCESS_KINDS = ['compute', 'graphics', 'mps'] as const;

type RecordKind = keyof typeof WIRE_SLOT_NAMES;

/** One record kind resolved: each slot name's position, and `slots`, the record's length. */
export type RecordPositions<K extends RecordKind> = { readonly [N in (typeof WIRE_SLOT_NAMES)[K][number]]: number } & {
  readonly slots: number;
};

/** The whole layout resolved to positions (and the process kind bits). */
export type WireLayout = { readonly [K in RecordKind]: RecordPositions<K> } & {
  readonly processKindBits: { readonly [N in (typeof WIRE_PROCESS_KINDS)[number]]: number };
};

function staleAddon(problem: string): Error {
  return new Error(`gpugate: the native addon's wire layout ${problem}; this TypeScript needs a matching build (npm run build:native)`);
}

function namesOf(native: NativeWireLayout, kind: keyof NativeWireLayout): readonly string[] {
  const names = (native as unknown as Record<string, unknown>)[kind];
  if (!Array.isArray(names) || !names.every((name) => typeof name === 'string')) throw staleAddon(`has no ${kind} record`);
  return names as string[];
}

function positionsOf(native: NativeWireLayout, kind: RecordKind): Record<string, number> {
  const names = namesOf(native, kind);
  const entries = WIRE_SLOT_NAMES[kind].map((name): [string, number] => {
    const at = names.indexOf(name);
    if (at < 0) throw staleAddon(`has no slot '${name}' in its ${kind} records (it has ${names.join(', ')})`);
    return [name, at];
  });
  // Built in one go: an object grown one computed key at a time turns into a slow dictionary in V8.
  return Object.fromEntries([...entries, ['slots', names.length]]);
}

/**
 * Resolves the addon's slot names to positions.
 * @throws Error naming the record kind and slot when the addon lacks one the decoder reads
 */
export function resolveWireLayout(native: NativeWireLayout): WireLayout {
  const records = (Object.keys(WIRE_SLOT_NAMES) as RecordKind[]).map((kind) => [kind, positionsOf(native, kind)] as const);
  const kinds = namesOf(native, 'processKinds');
  const processKindBits = Object.fromEntries(
    WIRE_PROCESS_KINDS.map((kind) => {
      const at = kinds.indexOf(kind);
      if (at < 0) throw staleAddon(`has no process kind '${kind}' (it has ${kinds.join(', ')})`);
      return [kind, 2 ** at];
    }),
  );
  return Object.fromEntries([...records, ['processKindBits', processKindBits]]) as WireLayout;
}

const resolved = new WeakMap<NativeBinding, WireLayout>();

/** The layout of a loaded addon, resolved on first use and kept. */
export function wireLayoutOf(binding: NativeBinding): WireLayout {
  let layout = resolved.get(binding);
  if (layout === undefined) {
    layout = resolveWireLayout(binding.encodingLayout());
    resolved.set(binding, layout);
  }
  return layout;
}
