import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { GpuDevice } from '../../src/types';
import { normalizePciBusId, parseSelectorList, selectDevices } from '../../src/gate/devices';
import { DeviceSelectionError } from '../../src/gate/device-selection-error';
import { fakeDevice } from '../helpers/fake-snapshot';
import { thrownBy } from '../helpers/thrown-by';

const SEED = { seed: 42, numRuns: 200 };

function gpu(index: number, uuid: string, pciBusId: string, migUuids: string[] = []): GpuDevice {
  return fakeDevice({
    index,
    uuid,
    name: 'NVIDIA RTX PRO 6000 Blackwell Server Edition',
    pciBusId,
    memory: null,
    migMode: migUuids.length > 0,
    migDevices: migUuids.map((uuid, slot) => ({ index: slot, uuid, gpuInstanceId: slot + 1, computeInstanceId: 0, memory: null, error: null })),
  });
}

const DEVICES = [
  gpu(0, 'GPU-3f1a0000-1111-2222-3333-444455556666', '00000000:1B:00.0'),
  gpu(1, 'GPU-3f1b0000-1111-2222-3333-444455556666', '00000000:1C:00.0'),
  gpu(2, 'GPU-77aa0000-1111-2222-3333-444455556666', '00000000:9B:00.0', ['MIG-aaaa0000-0000-0000-0000-000000000001', 'MIG-bbbb0000-0000-0000-0000-000000000002']),
];

function selectionError(fn: () => unknown): DeviceSelectionError {
  return thrownBy(fn, DeviceSelectionError);
}

describe('selectDevices with selectors', () => {
  it('selects by index, UUID, unique UUID prefix (any case), MIG UUID and PCI bus id in 4- or 8-digit form', () => {
    expect(selectDevices(DEVICES, ['1']).indices).toEqual([1]);
    expect(selectDevices(DEVICES, ['GPU-77aa0000-1111-2222-3333-444455556666']).indices).toEqual([2]);
    expect(selectDevices(DEVICES, ['gpu-3F1B']).indices).toEqual([1]);
    expect(selectDevices(DEVICES, ['MIG-bbbb'])).toMatchObject({ indices: [2], migUuids: ['MIG-bbbb0000-0000-0000-0000-000000000002'], source: 'option' });
    expect(selectDevices(DEVICES, ['0000:9b:00.0']).indices).toEqual([2]);
    expect(selectDevices(DEVICES, ['00000000:1c:00.0']).indices).toEqual([1]);
    expect(selectDevices(DEVICES, ['2', '0', '2']).indices).toEqual([2, 0]);
  });

  it('names the candidates of an ambiguous prefix', () => {
    const error = selectionError(() => selectDevices(DEVICES, ['GPU-3f1']));
    expect(error.selector).toBe('GPU-3f1');
    expect(error.available).toEqual([DEVICES[0]!.uuid, DEVICES[1]!.uuid]);
    expect(error.message).toMatch(/ambiguous/);
    expect(error.message).toContain(DEVICES[0]!.uuid);
  });

  it('names what exists when a selector matches nothing', () => {
    for (const selector of ['7', 'GPU-ffff', '0000:01:00.0', 'MIG-cccc']) {
      const error = selectionError(() => selectDevices(DEVICES, [selector]));
      expect(error.message).toContain(JSON.stringify(selector));
      expect(error.message).toContain('00000000:1B:00.0');
      expect(error.available.length).toBe(5);
    }
    expect(selectionError(() => selectDevices(DEVICES, ['banana'])).message).toMatch(/expected an NVML index/);
    expect(selectionError(() => selectDevices([], ['0'])).message).toMatch(/no GPUs are visible/);
  });

  it('an explicit empty list selects nothing and warns', () => {
    const selection = selectDevices(DEVICES, []);
    expect(selection.indices).toEqual([]);
    expect(selection.warnings.join()).toMatch(/no GPUs selected/);
  });
});

describe('selectDevices from the environment', () => {
  it('uses every device with no variables set', () => {
    expect(selectDevices(DEVICES, undefined, {})).toEqual({ indices: [0, 1, 2], migUuids: [], source: 'all', warnings: [] });
  });

  it('NVIDIA_VISIBLE_DEVICES: lists, all, none and void', () => {
    expect(selectDevices(DEVICES, undefined, { NVIDIA_VISIBLE_DEVICES: '2,0' })).toMatchObject({ indices: [2, 0], source: 'NVIDIA_VISIBLE_DEVICES' });
    expect(selectDevices(DEVICES, undefined, { NVIDIA_VISIBLE_DEVICES: 'all' })).toMatchObject({ indices: [0, 1, 2], source: 'NVIDIA_VISIBLE_DEVICES' });
    expect(selectDevices(DEVICES, undefined, { NVIDIA_VISIBLE_DEVICES: 'none' })).toMatchObject({ indices: [], source: 'NVIDIA_VISIBLE_DEVICES' });
    expect(selectDevices(DEVICES, undefined, { NVIDIA_VISIBLE_DEVICES: 'void' }).indices).toEqual([]);
    expect(selectDevices(DEVICES, undefined, { NVIDIA_VISIBLE_DEVICES: 'GPU-77aa' }).indices).toEqual([2]);
  });

  it('NVIDIA_VISIBLE_DEVICES takes precedence over CUDA_VISIBLE_DEVICES, except all', () => {
    expect(selectDevices(DEVICES, undefined, { NVIDIA_VISIBLE_DEVICES: '1', CUDA_VISIBLE_DEVICES: '0' }).indices).toEqual([1]);
    expect(selectDevices(DEVICES, undefined, { NVIDIA_VISIBLE_DEVICES: 'all', CUDA_VISIBLE_DEVICES: '0' })).toMatchObject({ indices: [0], source: 'CUDA_VISIBLE_DEVICES' });
  });

  it('host indices in NVIDIA_VISIBLE_DEVICES inside a renumbered container select what NVML sees, with a warning', () => {
    const selection = selectDevices(DEVICES.slice(0, 2), undefined, { NVIDIA_VISIBLE_DEVICES: '5,6' });
    expect(selection.indices).toEqual([0, 1]);
    expect(selection.warnings.join()).toMatch(/container/);
  });

  it('CUDA_VISIBLE_DEVICES ordinals warn unless CUDA_DEVICE_ORDER=PCI_BUS_ID; -1 and empty select none', () => {
    const warned = selectDevices(DEVICES, undefined, { CUDA_VISIBLE_DEVICES: '1,2' });
    expect(warned).toMatchObject({ indices: [1, 2], source: 'CUDA_VISIBLE_DEVICES' });
    expect(warned.warnings.join()).toMatch(/CUDA_DEVICE_ORDER=PCI_BUS_ID/);
    expect(selectDevices(DEVICES, undefined, { CUDA_VISIBLE_DEVICES: '1,2', CUDA_DEVICE_ORDER: 'PCI_BUS_ID' }).warnings.filter((w) => /ORDER/.test(w))).toEqual([]);
    expect(selectDevices(DEVICES, undefined, { CUDA_VISIBLE_DEVICES: '-1' }).indices).toEqual([]);
    expect(selectDevices(DEVICES, undefined, { CUDA_VISIBLE_DEVICES: '' }).indices).toEqual([]);
    const truncated = selectDevices(DEVICES, undefined, { CUDA_VISIBLE_DEVICES: '0,-1,2', CUDA_DEVICE_ORDER: 'PCI_BUS_ID' });
    expect(truncated.indices).toEqual([0]);
    expect(truncated.warnings.join()).toMatch(/ignores every entry/);
    expect(selectDevices(DEVICES, undefined, { CUDA_VISIBLE_DEVICES: 'MIG-aaaa0000-0000-0000-0000-000000000001' }).migUuids).toEqual(['MIG-aaaa0000-0000-0000-0000-000000000001']);
  });

  it('SLURM_JOB_GPUS comes after the CUDA variables', () => {
    expect(selectDevices(DEVICES, undefined, { SLURM_JOB_GPUS: '0,2' })).toMatchObject({ indices: [0, 2], source: 'SLURM_JOB_GPUS' });
    expect(selectDevices(DEVICES, undefined, { SLURM_JOB_GPUS: '0,2', CUDA_VISIBLE_DEVICES: '1' }).indices).toEqual([1]);
  });

  it('an environment selector that matches nothing names the variable and what exists', () => {
    const error = selectionError(() => selectDevices(DEVICES, undefined, { SLURM_JOB_GPUS: '9' }));
    expect(error.message).toMatch(/SLURM_JOB_GPUS/);
    expect(error.message).toContain('GPU-77aa0000');
  });
});

describe('selector properties', () => {
  const uuidArb = fc.uuid().map((u) => `GPU-${u}`);
  const devicesArb = fc.uniqueArray(uuidArb, { minLength: 1, maxLength: 16, selector: (u) => u.slice(0, 12) }).map((uuids) =>
    uuids.map((uuid, index) => gpu(index, uuid, `00000000:${(index + 16).toString(16).toUpperCase()}:00.0`)),
  );

  it('every device is found by its index, full UUID, 12-character prefix and bus id in any case (property)', () => {
    fc.assert(
      fc.property(devicesArb, fc.boolean(), (devices, upper) => {
        for (const device of devices) {
          const pciBusId = device.pciBusId as string;
          const uuid = device.uuid as string;
          const bus = upper ? pciBusId.toUpperCase() : pciBusId.toLowerCase();
          const shortBus = bus.slice(4);
          for (const selector of [String(device.index), uuid, uuid.slice(0, 12), bus, shortBus]) {
            expect(selectDevices(devices, [upper ? selector.toUpperCase() : selector.toLowerCase()]).indices).toEqual([device.index]);
          }
        }
      }),
      SEED,
    );
  });

  it('selection is an ordered set of existing indices or an error, never anything else (property)', () => {
    fc.assert(
      fc.property(devicesArb, fc.array(fc.oneof(fc.nat(20).map(String), fc.string()), { maxLength: 6 }), (devices, selectors) => {
        try {
          const { indices } = selectDevices(devices, selectors);
          expect(new Set(indices).size).toBe(indices.length);
          for (const index of indices) expect(devices.some((d) => d.index === index)).toBe(true);
        } catch (error) {
          expect(error).toBeInstanceOf(DeviceSelectionError);
        }
      }),
      SEED,
    );
  });

  it('normalizePciBusId accepts 4- and 8-digit domains in any case and nothing else (property)', () => {
    fc.assert(
      fc.property(fc.nat(0xffff), fc.nat(0xff), fc.nat(0x1f), fc.nat(7), (domain, bus, dev, fn) => {
        const hex = (n: number, w: number) => n.toString(16).padStart(w, '0');
        const canonical = `${hex(domain, 8)}:${hex(bus, 2)}:${hex(dev, 2)}.${fn}`.toUpperCase();
        expect(normalizePciBusId(`${hex(domain, 4)}:${hex(bus, 2)}:${hex(dev, 2)}.${fn}`)).toBe(canonical);
        expect(normalizePciBusId(canonical.toLowerCase())).toBe(canonical);
      }),
      SEED,
    );
    expect(normalizePciBusId('000:1b:00.0')).toBeNull();
    expect(normalizePciBusId('0000:1b:00.8')).toBeNull();
  });

  it('parseSelectorList trims and drops empty entries', () => {
    expect(parseSelectorList(' 0, GPU-3f1a ,,2 ')).toEqual(['0', 'GPU-3f1a', '2']);
    expect(parseSelectorList('')).toEqual([]);
  });
});
