import { describe, expect, it } from 'vitest';
import { Batcher, type BatcherOptions, Slots } from '../src/db/batch.ts';

const overloaded = () => new Error('overloaded');

/**
 * A Batcher over `execute`, recording each call's items and the most calls running at
 * once; `gate` holds every call until released.
 */
function recording(options: { slots: Slots | number; maxSize?: number; maxWaiting?: number; fail?: (items: number[]) => unknown; running?: { now: number; most: number } }) {
  const calls: number[][] = [];
  const running = options.running ?? { now: 0, most: 0 };
  let release: () => void = () => {};
  let gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const slots = typeof options.slots === 'number' ? new Slots(options.slots) : options.slots;
  const batcher = new Batcher<number, string>({
    slots,
    maxSize: options.maxSize ?? 64,
    maxWaiting: options.maxWaiting ?? 100,
    overloaded,
    execute: async (items) => {
      calls.push(items);
      running.most = Math.max(running.most, ++running.now);
      try {
        await gate;
        const error = options.fail?.(items);
        if (error) throw error;
        return items.map((item) => `answer ${item}`);
      } finally {
        running.now--;
      }
    },
  });
  return {
    batcher,
    calls,
    running,
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
    const { batcher, calls, open } = recording({ slots: 1 });
    const answers = [1, 2, 3, 4].map((item) => batcher.run(item));
    expect(calls).toEqual([[1]]);
    open();
    expect(await Promise.all(answers)).toEqual(['answer 1', 'answer 2', 'answer 3', 'answer 4']);
    expect(calls).toEqual([[1], [2, 3, 4]]);
  });

  it('runs up to its slots\' statements at once, each of at most `maxSize` items', async () => {
    const { batcher, calls, open } = recording({ slots: 2, maxSize: 2 });
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
    const options: BatcherOptions<number, number> = { slots: new Slots(1), maxSize: 64, maxWaiting: 100, overloaded, gather: true, execute };
    const batcher = new Batcher(options);
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
    const { batcher, calls, open } = recording({ slots: 1, fail: (items) => (items.includes(3) ? pgError('22P05') : null) });
    const answers = [1, 2, 3, 4].map((item) => batcher.run(item).catch((error: Error) => `failed: ${(error.cause as { code: string }).code}`));
    open();
    expect(await Promise.all(answers)).toEqual(['answer 1', 'answer 2', 'failed: 22P05', 'answer 4']);
    expect(calls).toEqual([[1], [2, 3, 4], [2], [3], [4]]);
  });

  it('retries one item at a time, within its slot', async () => {
    const { batcher, running, open } = recording({ slots: 1, fail: (items) => (items.length > 1 ? pgError('23505') : null) });
    const answers = [1, 2, 3, 4, 5].map((item) => batcher.run(item));
    open();
    expect(await Promise.all(answers)).toEqual(['answer 1', 'answer 2', 'answer 3', 'answer 4', 'answer 5']);
    expect(running.most).toBe(1);
  });

  it('shares its slots with the batchers given the same ones, taking turns', async () => {
    const slots = new Slots(1);
    const running = { now: 0, most: 0 };
    const a = recording({ slots, running });
    const b = recording({ slots, running });
    const answers = [a.batcher.run(1), a.batcher.run(2), b.batcher.run(10), a.batcher.run(3), b.batcher.run(11)];
    expect([a.calls, b.calls]).toEqual([[[1]], []]);
    a.open();
    b.open();
    expect(await Promise.all(answers)).toHaveLength(5);
    expect(running.most).toBe(1);
    expect([a.calls, b.calls]).toEqual([[[1], [2, 3]], [[10, 11]]]);
  });

  it('refuses items beyond `maxWaiting` at once', async () => {
    const { batcher, open } = recording({ slots: 1, maxWaiting: 2 });
    const answers = [1, 2, 3, 4].map((item) => batcher.run(item).catch((error: Error) => error.message));
    open();
    // 1 goes at once; 2 and 3 wait; 4 finds two waiting.
    expect(await Promise.all(answers)).toEqual(['answer 1', 'answer 2', 'answer 3', 'overloaded']);
  });

  it('fails the whole statement on other errors, without retrying', async () => {
    const lost = Object.assign(new Error('Connection terminated unexpectedly'), { code: undefined });
    const { batcher, calls, open } = recording({ slots: 1, fail: (items) => (items.length > 1 ? lost : null) });
    const answers = [1, 2, 3].map((item) => batcher.run(item).catch((error: Error) => error.message));
    open();
    expect(await Promise.all(answers)).toEqual(['answer 1', 'Connection terminated unexpectedly', 'Connection terminated unexpectedly']);
    expect(calls).toEqual([[1], [2, 3]]);
  });
});
