import cliProgress from 'cli-progress';

export interface PhaseTiming {
  phase: string;
  rows: number;
  seconds: number;
}

export interface ProgressOptions {
  /** Live bars only make sense on a terminal; CI logs get one line per phase instead. */
  bars?: boolean;
  log?: (line: string) => void;
}

/** Runs named phases, shows a bar for those that write rows, and keeps each phase's duration for the report. */
export class Progress {
  readonly timings: PhaseTiming[] = [];
  private readonly bars: boolean;
  private readonly log: (line: string) => void;

  constructor(
    private readonly label: string,
    options: ProgressOptions = {},
  ) {
    this.bars = options.bars ?? Boolean(process.stderr.isTTY);
    this.log = options.log ?? console.log;
  }

  async phase<T>(name: string, rows: number, work: (advance: (rows: number) => void) => Promise<T>): Promise<T> {
    const bar =
      this.bars && rows > 0
        ? new cliProgress.SingleBar(
            { format: `${this.label} ${name.padEnd(12)} [{bar}] {percentage}% {value}/{total} rows, {duration}s`, clearOnComplete: true },
            cliProgress.Presets.shades_classic,
          )
        : undefined;
    bar?.start(rows, 0);
    const started = performance.now();
    try {
      return await work((done) => bar?.increment(done));
    } finally {
      bar?.stop();
      const seconds = (performance.now() - started) / 1000;
      this.timings.push({ phase: name, rows, seconds });
      this.log(`${this.label} ${name}: ${rows > 0 ? `${rows.toLocaleString('en-US')} rows in ` : ''}${seconds.toFixed(1)} s`);
    }
  }
}
