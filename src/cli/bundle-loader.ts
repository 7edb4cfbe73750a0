/**
 * dist/cli/main.js as built: the `gpugate` command's entry point when the CLI is bundled. It
 * compiles the bundle beside it (the whole command, src/cli/main.ts and all it uses, in one file)
 * with its build-time V8 code cache when that may be trusted (src/cli/code-cache.ts), and runs it
 * as this very module, so the bundle's `require.main === module` holds and it runs the command.
 */

// First, before the bundle is read: SIGUSR1 must never open Node's inspector (a root shell).
import './inspector-guard';
import { compileBundle, runBundle } from './code-cache';

runBundle(compileBundle(__dirname), __dirname, module, require);
