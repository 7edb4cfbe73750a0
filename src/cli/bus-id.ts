/** PCI bus ids as gpugate's output writes them. */

/** A PCI bus id as sysfs and lspci write it: 4-digit domain, lower case (`0000:9b:00.0`). */
export function shortBusId(pciBusId: string): string {
  const match = /^([0-9a-fA-F]+):([0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F])$/.exec(pciBusId);
  if (match === null) return pciBusId.toLowerCase();
  const domain = (match[1] as string).slice(-4).padStart(4, '0');
  return `${domain}:${match[2] as string}`.toLowerCase();
}
