import { describe, expect, it } from 'vitest';
import {
  keptLogCommand,
  phaseText,
  progressText,
  queueText,
  replicaPods,
  replicasText,
  tensorboardCommand,
} from './summary';

const job = {
  kind: 'DistTrainJob',
  metadata: {
    name: 'mnist',
    namespace: 'team',
    labels: { 'kueue.x-k8s.io/queue-name': 'research' },
  },
  spec: { replicaSpecs: { Chief: {}, Worker: { replicas: 2 } } },
  status: {
    phase: 'Running',
    progress: { step: 120, totalSteps: 300, loss: 0.3125 },
    replicaStatuses: { Chief: { ready: 1 }, Worker: { ready: 1 } },
  },
};

describe('a job in a few words, as disttrain jobs get says it', () => {
  it('shows phase, progress, replicas and queue', () => {
    expect(phaseText(job)).toBe('Running');
    expect(progressText(job)).toBe('step 120/300 loss 0.3125');
    expect(replicasText(job)).toBe('Chief 1/1, Worker 1/2');
    expect(queueText(job)).toBe('research');
  });

  it('says Pending and - before the operator writes', () => {
    const fresh = { ...job, status: undefined, metadata: { name: 'new', namespace: 'team' } };
    expect(phaseText(fresh)).toBe('Pending');
    expect(progressText(fresh)).toBe('-');
    expect(queueText(fresh)).toBe('-');
  });

  it('names every pod and the TensorBoard command, a TFJob under its own keys', () => {
    expect(replicaPods(job).map(found => found.pod)).toEqual([
      'mnist-chief-0',
      'mnist-worker-0',
      'mnist-worker-1',
    ]);
    expect(keptLogCommand(job, 'worker-1')).toBe(
      'disttrain jobs logs mnist -n team --replica worker-1'
    );
    const tfjob = {
      kind: 'TFJob',
      metadata: { name: 'tf', namespace: 'team' },
      spec: { tfReplicaSpecs: { Worker: { replicas: 1 } } },
    };
    expect(replicaPods(tfjob)).toEqual([{ pod: 'tf-worker-0', replica: 'worker-0' }]);
    const master = { ...tfjob, spec: { tfReplicaSpecs: { Master: {}, worker: { replicas: 1 } } } };
    expect(replicaPods(master)).toEqual([
      { pod: 'tf-chief-0', replica: 'chief-0' },
      { pod: 'tf-worker-0', replica: 'worker-0' },
    ]);
    expect(tensorboardCommand(tfjob)).toBe('disttrain jobs tensorboard tf -n team --kind TFJob');
  });
});
