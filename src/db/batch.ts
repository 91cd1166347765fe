interface Waiting<I, O> {
  item: I;
  resolve: (value: O) => void;
  reject: (error: unknown) => void;
}

export interface BatcherOptions<I, O> {
  /** Runs one statement for `items` and answers each, in order. */
  execute: (items: I[]) => Promise<O[]>;
  /** How many `execute` calls may run at once. */
  concurrency: number;
  /** The most items one call takes. */
  maxSize: number;
  /**
   * Let the event loop take in what else has arrived before starting a statement. For
   * PGlite, which runs each statement on this thread before the next request is even
   * read: without this, statements never overlap and never batch.
   */
  gather?: boolean;
}

/**
 * Natural batching (group commit): up to `concurrency` statements run at once; items
 * that arrive while all of them are busy wait, and go together in the next one. Nothing
 * waits for a timer — an item that finds a free slot goes at once — and each caller's
 * promise settles only when the statement carrying its item has committed.
 *
 * When a statement of several items fails with an error about its data (SQLSTATE class
 * 22 or 23), each item is retried alone, so one item the database refuses cannot fail
 * the others; a statement fails as a whole, so the retry repeats nothing.
 */
export class Batcher<I, O> {
  private readonly options: BatcherOptions<I, O>;
  private readonly waiting: Waiting<I, O>[] = [];
  private running = 0;
  private gathering = false;

  constructor(options: BatcherOptions<I, O>) {
    this.options = options;
  }

  run(item: I): Promise<O> {
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
    if (this.gathering) return;
    this.gathering = true;
    setImmediate(() => {
      this.gathering = false;
      this.drain();
    });
  }

  private drain(): void {
    while (this.running < this.options.concurrency && this.waiting.length > 0) {
      const batch = this.waiting.splice(0, this.options.maxSize);
      this.running++;
      this.settle(batch).finally(() => {
        this.running--;
        this.next();
      });
    }
  }

  private async settle(batch: Waiting<I, O>[]): Promise<void> {
    try {
      const results = await this.options.execute(batch.map((waiting) => waiting.item));
      for (const [index, waiting] of batch.entries()) waiting.resolve(results[index] as O);
    } catch (error) {
      if (batch.length === 1 || !isDataError(error)) {
        for (const waiting of batch) waiting.reject(error);
        return;
      }
      await Promise.all(batch.map((waiting) => this.settle([waiting])));
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
