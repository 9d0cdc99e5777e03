// A job in a few words, as `disttrain jobs get` and the dashboard say it (disttrain/summary.py).

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
    progress?: Progress;
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

/** `step 120/300 loss 0.3125`, or `-` before the first report. */
export function progressText(job: JobData): string {
  const progress = job.status?.progress;
  if (progress?.step === undefined) {
    return '-';
  }
  const total = progress.totalSteps !== undefined ? `/${progress.totalSteps}` : '';
  const loss = progress.loss !== undefined ? ` loss ${Number(progress.loss.toPrecision(4))}` : '';
  return `step ${progress.step}${total}${loss}`;
}

/** `Chief 1/1, Worker 1/2`: ready over desired, per replica type (a TFJob's under its own keys). */
export function replicasText(job: JobData): string {
  const specs = job.spec.replicaSpecs ?? job.spec.tfReplicaSpecs ?? {};
  const statuses = job.status?.replicaStatuses ?? {};
  return Object.entries(specs)
    .map(([kind, spec]) => `${kind} ${statuses[kind]?.ready ?? 0}/${spec.replicas ?? 1}`)
    .join(', ');
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

/** The task type a replica key names, as disttrain names its pods: a TFJob's keys in any case, and
 * Master, TFJob's older name for Chief, as chief. */
function taskType(kind: string): string {
  const type = kind.toLowerCase();
  return type === 'master' ? 'chief' : type;
}

/** Each replica's pod (`{job}-{type}-{index}`, whose page in Headlamp shows its log) and the command
 * that reads its log after the pod is gone (disttrain keeps every attempt's). */
export function replicaPods(job: JobData): ReplicaPod[] {
  const specs = job.spec.replicaSpecs ?? job.spec.tfReplicaSpecs ?? {};
  return Object.entries(specs).flatMap(([kind, spec]) =>
    Array.from({ length: spec.replicas ?? 1 }, (_, index) => {
      const replica = `${taskType(kind)}-${index}`;
      return { pod: `${job.metadata.name}-${replica}`, replica };
    })
  );
}

export function keptLogCommand(job: JobData, replica: string): string {
  const kind = job.kind === 'TFJob' ? ' --kind TFJob' : '';
  return `disttrain jobs logs ${job.metadata.name} -n ${job.metadata.namespace} --replica ${replica}${kind}`;
}
