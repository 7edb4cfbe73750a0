'use strict';
/**
 * Prints, as one JSON object, what gpugate's public API reports about the NVML library it bound:
 * `session.library` (path, driver / NVML / CUDA versions, and for each logical function the
 * exported symbol variant that bound). gpu-validate uses it when `gpugate status --json` does not
 * carry the variants.
 *
 * usage: node library-info.cjs PACKAGE_DIR   (an installed gpugate, or a built checkout)
 */
const path = require('node:path');

async function main() {
  const root = process.argv[2];
  if (root === undefined) {
    process.stderr.write('usage: node library-info.cjs PACKAGE_DIR\n');
    process.exit(64);
  }
  const gpugate = require(path.resolve(root));
  if (typeof gpugate.openNvml !== 'function') {
    process.stderr.write(`${root}: this gpugate exports no openNvml()\n`);
    process.exit(69);
  }
  const session = await gpugate.openNvml();
  try {
    process.stdout.write(`${JSON.stringify(session.library)}\n`);
  } finally {
    await session.close();
  }
}

main().catch((err) => {
  process.stderr.write(`library-info: ${err && err.message ? err.message : String(err)}\n`);
  process.exit(69);
});
