interface Waiting<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (error: unknown) => void;
}

/** Statements that may run at once, shared by the batchers given it: a slot per statement. */
export class Slots {
  private readonly limit: number;
  private used = 0;
  private readonly wakers: (() => void)[] = [];
  /** Whose turn it is to be woken first, so no batcher's items starve another's. */
  private turn = 0;

  constructor(limit: number) {
    this.limit = Math.max(1, limit);
  }

  take(): boolean {
    if (this.used >= this.limit) return false;
    this.used++;
    return true;
  }

  release(): void {
    this.used--;
    const count = this.wakers.length;
    if (count === 0) return;
    this.turn = (this.turn + 1) % count;
    for (let i = 0; i < count; i++) this.wakers[(this.turn + i) % count]?.();
  }

  /** `wake` runs whenever a slot frees. */
  onRelease(wake: () => void): void {
    this.wakers.push(wake);
  }
}

export interface BatcherOptions<I, O> {
  /** Runs one statement for `items` and answers each, in order. */
  execute: (items: I[]) => Promise<O[]>;
  /** The slots this batcher's statements take (several batchers may share them). */
  slots: Slots;
  /** The most items one call takes. */
  maxSize: number;
  /** The most items that may wait; more are refused with `overloaded()`. */
  maxWaiting: number;
  overloaded: () => Error;
  /**
   * Let the event loop take in what else has arrived before starting a statement. For
   * PGlite, which runs each statement on this thread before the next request is even
   * read: without this, statements never overlap and never batch.
   */
  gather?: boolean;
  /**
   * Whether a failed statement of several items is retried item by item (default: an error about
   * its data, SQLSTATE class 22 or 23). A batch whose items are independent transactions (provider
   * events) retries on any failure but the database being unreachable, so one item's failure — a
   * deadlock with another batch, a row the database refuses — cannot fail the others.
   */
  alone?: (error: unknown) => boolean;
}

/**
 * Natural batching (group commit): statements run while slots are free; items that
 * arrive while none is wait, and go together in the next statement. Nothing waits for a
 * timer — an item that finds a free slot goes at once — and each caller's promise
 * settles only when the statement carrying its item has committed.
 *
 * When a statement of several items fails with an error about its data (SQLSTATE class
 * 22 or 23; `alone` may say otherwise), its items are retried one by one in the same slot, so
 * one item the database refuses cannot fail the others; a statement (or a batch's transaction)
 * fails as a whole, so the retry repeats nothing.
 */
export class Batcher<I, O> {
  private readonly options: BatcherOptions<I, O>;
  private readonly waiting: Waiting<I, O>[] = [];
  private gathering = false;

  constructor(options: BatcherOptions<I, O>) {
    this.options = options;
    options.slots.onRelease(() => this.next());
  }

  run(item: I): Promise<O> {
    if (this.waiting.length >= this.options.maxWaiting) return Promise.reject(this.options.overloaded());
    return new Promise<O>((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    if (!this.options.gather) {
      this.drain();
      return;
    }
    if (this.gathering || this.waiting.length === 0) return;
    this.gathering = true;
    setImmediate(() => {
      this.gathering = false;
      this.drain();
    });
  }

  private drain(): void {
    while (this.waiting.length > 0 && this.options.slots.take()) {
      const batch = this.waiting.splice(0, this.options.maxSize);
      this.settle(batch).finally(() => this.options.slots.release());
    }
  }

  private async settle(batch: Waiting<I, O>[]): Promise<void> {
    try {
      const results = await this.options.execute(batch.map((waiting) => waiting.item));
      for (const [index, waiting] of batch.entries()) waiting.resolve(results[index] as O);
    } catch (error) {
      if (batch.length === 1 || !(this.options.alone ?? isDataError)(error)) {
        for (const waiting of batch) waiting.reject(error);
        return;
      }
      for (const waiting of batch) await this.settle([waiting]);
    }
  }
}

/** An error PostgreSQL raised about a statement's values (SQLSTATE class 22 or 23), not about the connection. */
function isDataError(error: unknown): boolean {
  for (let cause = error; cause instanceof Error; cause = cause.cause) {
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string' && /^2[23][0-9A-Z]{3}$/.test(code)) return true;
  }
  return false;
}
