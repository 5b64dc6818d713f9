/**
 * A spinner on stderr for operator commands that take longer than a second (waiting for a reply,
 * paging through thousands of sessions, a Redis that is slow to answer), so a person at a terminal
 * sees that something is happening and what. Only when stderr is a terminal: piped output and logs
 * never get control characters. The first thing the command itself writes (to stdout or stderr)
 * clears the spinner line, so it never mixes with real output.
 */
const FRAMES = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
/** Commands that finish sooner never show it. */
export const SPINNER_DELAY_MS = 1000;

interface Spinner {
  label: string;
  frame: number;
  shown: boolean;
  delay: NodeJS.Timeout;
  tick?: NodeJS.Timeout;
}

let current: Spinner | undefined;
const realStdout = process.stdout.write.bind(process.stdout);
const realStderr = process.stderr.write.bind(process.stderr);
let patched = false;

function draw(s: Spinner): void {
  s.shown = true;
  realStderr(`\r\x1b[K${FRAMES[s.frame++ % FRAMES.length]} ${s.label}`);
}

/** Any write by the command ends the spinner first (erasing its line). */
function patchWrites(): void {
  if (patched) return;
  patched = true;
  const guard = <W extends (...a: never[]) => boolean>(real: W): W =>
    ((...args: Parameters<W>) => {
      stopProgress();
      return real(...args);
    }) as W;
  process.stdout.write = guard(realStdout) as typeof process.stdout.write;
  process.stderr.write = guard(realStderr) as typeof process.stderr.write;
}

/** Show `label` with a spinner if this is still running in a second (stderr a TTY only). */
export function startProgress(label: string, env: NodeJS.ProcessEnv = process.env): void {
  if (!process.stderr.isTTY || env.TERM === "dumb" || env.CI) return;
  stopProgress();
  patchWrites();
  const s: Spinner = {
    label,
    frame: 0,
    shown: false,
    delay: setTimeout(() => {
      draw(s);
      s.tick = setInterval(() => draw(s), 100);
      s.tick.unref();
    }, SPINNER_DELAY_MS),
  };
  s.delay.unref();
  current = s;
}

/** Change what the spinner says (e.g. a running count); no-op when none runs. */
export function updateProgress(label: string): void {
  if (current) current.label = label;
}

export function stopProgress(): void {
  const s = current;
  if (!s) return;
  current = undefined;
  clearTimeout(s.delay);
  if (s.tick) clearInterval(s.tick);
  if (s.shown) realStderr("\r\x1b[K");
}
