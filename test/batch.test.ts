import { describe, expect, it } from 'vitest';
import { Batcher } from '../src/db/batch.ts';

/** A Batcher over `execute`, recording each call's items; `gate` holds every call until released. */
function recording(options: { concurrency: number; maxSize?: number; fail?: (items: number[]) => unknown }) {
  const calls: number[][] = [];
  let release: () => void = () => {};
  let gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const batcher = new Batcher<number, string>({
    concurrency: options.concurrency,
    maxSize: options.maxSize ?? 64,
    execute: async (items) => {
      calls.push(items);
      await gate;
      const error = options.fail?.(items);
      if (error) throw error;
      return items.map((item) => `answer ${item}`);
    },
  });
  return {
    batcher,
    calls,
    open: () => {
      release();
      gate = Promise.resolve();
    },
  };
}

/** An error as the driver reports PostgreSQL's, wrapped the way Drizzle wraps it. */
function pgError(code: string): Error {
  return new Error('Failed query', { cause: Object.assign(new Error('refused'), { code }) });
}

describe('Batcher', () => {
  it('sends an item at once while a slot is free, and what arrives meanwhile together', async () => {
    const { batcher, calls, open } = recording({ concurrency: 1 });
    const answers = [1, 2, 3, 4].map((item) => batcher.run(item));
    expect(calls).toEqual([[1]]);
    open();
    expect(await Promise.all(answers)).toEqual(['answer 1', 'answer 2', 'answer 3', 'answer 4']);
    expect(calls).toEqual([[1], [2, 3, 4]]);
  });

  it('runs up to `concurrency` statements at once, each of at most `maxSize` items', async () => {
    const { batcher, calls, open } = recording({ concurrency: 2, maxSize: 2 });
    const answers = [1, 2, 3, 4, 5, 6, 7].map((item) => batcher.run(item));
    expect(calls).toEqual([[1], [2]]);
    open();
    expect(await Promise.all(answers)).toHaveLength(7);
    expect(calls).toEqual([[1], [2], [3, 4], [5, 6], [7]]);
  });

  it('with `gather`, takes in what arrives before the event loop turns, even with a slot free', async () => {
    const calls: number[][] = [];
    const execute = async (items: number[]) => {
      calls.push(items);
      return items;
    };
    const batcher = new Batcher<number, number>({ concurrency: 1, maxSize: 64, gather: true, execute });
    const first = [1, 2, 3].map((item) => batcher.run(item));
    await new Promise((resolve) => setTimeout(resolve, 0));
    const second = [4, 5].map((item) => batcher.run(item));
    expect(await Promise.all([...first, ...second])).toEqual([1, 2, 3, 4, 5]);
    expect(calls).toEqual([
      [1, 2, 3],
      [4, 5],
    ]);
  });

  it('retries alone the items of a statement refused for its data: one bad item fails only itself', async () => {
    const { batcher, calls, open } = recording({ concurrency: 1, fail: (items) => (items.includes(3) ? pgError('22P05') : null) });
    const answers = [1, 2, 3, 4].map((item) => batcher.run(item).catch((error: Error) => `failed: ${(error.cause as { code: string }).code}`));
    open();
    expect(await Promise.all(answers)).toEqual(['answer 1', 'answer 2', 'failed: 22P05', 'answer 4']);
    expect(calls).toEqual([[1], [2, 3, 4], [2], [3], [4]]);
  });

  it('fails the whole statement on other errors, without retrying', async () => {
    const lost = Object.assign(new Error('Connection terminated unexpectedly'), { code: undefined });
    const { batcher, calls, open } = recording({ concurrency: 1, fail: (items) => (items.length > 1 ? lost : null) });
    const answers = [1, 2, 3].map((item) => batcher.run(item).catch((error: Error) => error.message));
    open();
    expect(await Promise.all(answers)).toEqual(['answer 1', 'Connection terminated unexpectedly', 'Connection terminated unexpectedly']);
    expect(calls).toEqual([[1], [2, 3]]);
  });
});
