// A job in a few words, as `disttrain jobs get` and the dashboard say it: a port of disttrain/summary.py,
// tested against the same fixtures (tests/fixtures/summaries/).

export interface ReplicaSpec {
  replicas?: number;
}

export interface ReplicaStatus {
  ready?: number;
}

export interface Progress {
  step?: number;
  totalSteps?: number;
  loss?: number;
  stepsPerSecond?: number;
  estimatedRemainingSeconds?: number;
}

export interface SavedCheckpoint {
  step: number;
  time?: string;
  path?: string;
}

export interface Evaluation {
  step?: number;
  metrics?: Record<string, number>;
  final?: boolean;
}

export interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

export interface JobData {
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  spec: {
    strategy?: string;
    replicaSpecs?: Record<string, ReplicaSpec>;
    tfReplicaSpecs?: Record<string, ReplicaSpec>;
  };
  status?: {
    phase?: string;
    ready?: string;
    restartCount?: number;
    disruptions?: number;
    progress?: Progress;
    checkpoint?: SavedCheckpoint;
    evaluation?: Evaluation;
    conditions?: Condition[];
    replicaStatuses?: Record<string, ReplicaStatus>;
    tensorboard?: { service: string; url: string; ready?: boolean };
  };
}

export const QUEUE_LABEL = 'kueue.x-k8s.io/queue-name';

/** The phase disttrain wrote, else Pending: a job the operator has not written yet. */
export function phaseText(job: JobData): string {
  return job.status?.phase ?? 'Pending';
}

/** A number as Python's `format(value, '.4g')` writes it: 4 significant digits, trailing zeros dropped,
 * an exponent of at least two digits where the number is below 1e-4 or from 1e4 on. */
export function formatG4(value: number): string {
  if (value === 0 || !Number.isFinite(value)) {
    return String(value);
  }
  const rounded = toFourDigits(value);
  const [mantissa, power] = rounded.toExponential(3).split('e');
  const exponent = Number(power);
  if (exponent < -4 || exponent >= 4) {
    const digits = Math.abs(exponent).toString().padStart(2, '0');
    return `${stripZeros(mantissa)}e${exponent < 0 ? '-' : '+'}${digits}`;
  }
  return stripZeros(rounded.toFixed(3 - exponent));
}

/** `value` to 4 significant digits as Python rounds it: a tie goes to the even digit (JavaScript's
 * toPrecision rounds it up: 0.40625 is 0.4063 there, 0.4062 in Python). */
function toFourDigits(value: number): number {
  const [digits, power] = Math.abs(value).toExponential(60).split('e');
  const mantissa = digits.replace('.', '');
  const tie = /^50*$/.test(mantissa.slice(4));
  if (!tie || Number(mantissa[3]) % 2 !== 0) {
    return Number(value.toPrecision(4));
  }
  return Math.sign(value) * Number(`${mantissa[0]}.${mantissa.slice(1, 4)}e${power}`);
}

function stripZeros(fixed: string): string {
  return fixed.includes('.') ? fixed.replace(/\.?0+$/, '') : fixed;
}

/** `step 120/300 loss 0.3125`, or `-` before the first report. */
export function progressText(job: JobData): string {
  const progress = job.status?.progress;
  if (progress?.step === undefined) {
    return '-';
  }
  const total = progress.totalSteps !== undefined ? `/${progress.totalSteps}` : '';
  const loss = progress.loss !== undefined ? ` loss ${formatG4(progress.loss)}` : '';
  return `step ${progress.step}${total}${loss}`;
}

/** kubectl's short duration of `seconds`: 45s, 3m20s, 17m, 5h12m, 3d4h, 21d. */
export function duration(seconds: number): string {
  const whole = Math.max(0, Math.trunc(seconds));
  const minutes = Math.floor(whole / 60);
  const hours = Math.floor(whole / 3600);
  const days = Math.floor(whole / 86400);
  const two = (big: number, bigUnit: string, small: number, smallUnit: string) =>
    small ? `${big}${bigUnit}${small}${smallUnit}` : `${big}${bigUnit}`;
  if (whole < 120) {
    return `${whole}s`;
  }
  if (minutes < 10) {
    return two(minutes, 'm', whole % 60, 's');
  }
  if (hours < 3) {
    return `${minutes}m`;
  }
  if (hours < 8) {
    return two(hours, 'h', minutes % 60, 'm');
  }
  if (hours < 48) {
    return `${hours}h`;
  }
  if (hours < 192) {
    return two(days, 'd', hours % 24, 'h');
  }
  return `${days}d`;
}

/** `6m20s left at 2.125 steps/s`: the time left at the rate of the last minute; `-` where it is unknown. */
export function etaText(job: JobData): string {
  const progress = job.status?.progress;
  if (progress?.estimatedRemainingSeconds === undefined || progress.stepsPerSecond === undefined) {
    return '-';
  }
  return `${duration(progress.estimatedRemainingSeconds)} left at ${formatG4(progress.stepsPerSecond)} steps/s`;
}

/** `step 500 at 2026-01-01T00:00:00Z (ckpt/ckpt-500)`: the last checkpoint the trainer saved; `-` before one. */
export function checkpointText(job: JobData): string {
  const saved = job.status?.checkpoint;
  if (saved === undefined) {
    return '-';
  }
  const when = saved.time ? ` at ${new Date(saved.time).toISOString().replace(/\.\d{3}Z$/, 'Z')}` : '';
  return `step ${saved.step}${when}${saved.path ? ` (${saved.path})` : ''}`;
}

/** `step 100 accuracy 0.9123 loss 0.4062`: the evaluator's last scores, by name; `-` before any. */
export function evaluationText(job: JobData): string {
  const scores = job.status?.evaluation;
  if (scores === undefined) {
    return '-';
  }
  const metrics = Object.keys(scores.metrics ?? {})
    .sort()
    .map(name => `${name} ${formatG4((scores.metrics ?? {})[name])}`)
    .join(' ');
  const step = scores.step !== undefined ? `step ${scores.step} ` : '';
  return `${step}${metrics}${scores.final ? ' (final checkpoint)' : ''}`;
}

/** `3/4`: pods ready over pods desired, as the operator wrote it; `-` before it did. */
export function readyText(job: JobData): string {
  return job.status?.ready ?? '-';
}

/** Disttrain's replica types, in the order it lists them everywhere. */
const REPLICA_TYPES = ['Chief', 'Worker', 'PS', 'Evaluator'];

/** The replica type a spec's key names: a TFJob's keys in any case, and Master, TFJob's older name for
 * Chief, as Chief. */
function replicaType(key: string): string | undefined {
  const lower = key.toLowerCase();
  return REPLICA_TYPES.find(type => type.toLowerCase() === (lower === 'master' ? 'chief' : lower));
}

/** Each replica type the job has, with its count and status, in disttrain's order (a TFJob's under its
 * own keys). */
function replicaSets(job: JobData): { type: string; replicas: number; ready: number }[] {
  const specs = job.spec.replicaSpecs ?? job.spec.tfReplicaSpecs ?? {};
  const statuses = job.status?.replicaStatuses ?? {};
  const byType = (entries: Record<string, unknown>) =>
    new Map(Object.keys(entries).map(key => [replicaType(key), key] as const));
  const specKeys = byType(specs);
  const statusKeys = byType(statuses);
  return REPLICA_TYPES.filter(type => specKeys.has(type)).map(type => {
    const statusKey = statusKeys.get(type);
    return {
      type,
      replicas: specs[specKeys.get(type) as string].replicas ?? 1,
      ready: (statusKey !== undefined ? statuses[statusKey]?.ready : undefined) ?? 0,
    };
  });
}

/** `Chief 1/1, Worker 1/2`: ready over desired, per replica type. */
export function replicasText(job: JobData): string {
  return replicaSets(job)
    .map(({ type, replicas, ready }) => `${type} ${ready}/${replicas}`)
    .join(', ');
}

/** `2`: restarts counted against backoffLimit; `2 (1 disrupted)` when pods were also taken away on
 * purpose (evicted, preempted, drained), which restarted the job without counting. */
export function restartsText(job: JobData): string {
  const disruptions = job.status?.disruptions ?? 0;
  return `${job.status?.restartCount ?? 0}${disruptions ? ` (${disruptions} disrupted)` : ''}`;
}

export function queueText(job: JobData): string {
  return job.metadata.labels?.[QUEUE_LABEL] || '-';
}

/** The command that opens the job's TensorBoard from the viewer's machine. */
export function tensorboardCommand(job: JobData): string {
  const kind = job.kind === 'TFJob' ? ' --kind TFJob' : '';
  return `disttrain jobs tensorboard ${job.metadata.name} -n ${job.metadata.namespace}${kind}`;
}

export interface ReplicaPod {
  pod: string;
  replica: string;
}

/** Each replica's pod (`{job}-{type}-{index}`, whose page in Headlamp shows its log), named as
 * `--replica` takes it. */
export function replicaPods(job: JobData): ReplicaPod[] {
  return replicaSets(job).flatMap(({ type, replicas }) =>
    Array.from({ length: replicas }, (_, index) => {
      const replica = `${type.toLowerCase()}-${index}`;
      return { pod: `${job.metadata.name}-${replica}`, replica };
    })
  );
}

/** The command that reads a replica's log, its kept attempts too, after its pod is gone. */
export function keptLogCommand(job: JobData, replica: string): string {
  const kind = job.kind === 'TFJob' ? ' --kind TFJob' : '';
  return `disttrain jobs logs ${job.metadata.name} -n ${job.metadata.namespace} --replica ${replica}${kind}`;
}

/** What every view says of the job, as the fixtures hold it (disttrain_core.summary.summary). */
export function summary(job: JobData) {
  return {
    phase: phaseText(job),
    ready: readyText(job),
    restarts: restartsText(job),
    replicas: replicasText(job),
    progress: progressText(job),
    eta: etaText(job),
    checkpoint: checkpointText(job),
    evaluation: evaluationText(job),
    queue: queueText(job),
    tensorboardCommand: tensorboardCommand(job),
    replicaPods: replicaPods(job).map(({ pod, replica }) => ({
      pod,
      replica,
      logCommand: keptLogCommand(job, replica),
    })),
  };
}
