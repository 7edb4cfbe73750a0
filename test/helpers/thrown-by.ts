/**
 * The error a synchronous call throws, checked to be of the expected class, so a test can go on
 * to assert its fields. A call that returns, or throws something else, fails the test.
 */
import { expect } from 'vitest';

/** Call `fn`; it must throw an instance of `type`, which is returned. */
export function thrownBy<E extends Error>(fn: () => unknown, type: abstract new (...args: never[]) => E): E {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(type);
    return error as E;
  }
  throw new Error(`expected a ${type.name}`);
}

/** Await `action`; it must reject (or throw), and what it rejected with is returned, of any kind. */
export async function rejectionOf(action: () => unknown): Promise<unknown> {
  try {
    await action();
  } catch (error) {
    return error;
  }
  throw new Error('nothing was thrown');
}
