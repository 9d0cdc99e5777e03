// DistTrainJobs and served TFJobs as Headlamp resource classes.
import { KubeObject, KubeObjectInterface } from '@kinvolk/headlamp-plugin/lib/k8s/cluster';
import { JobData } from './summary';

export interface KubeJob extends KubeObjectInterface {
  spec: JobData['spec'];
  status?: JobData['status'];
}

/** What both kinds of job share: their spec and status, read as disttrain writes them. */
class Job extends KubeObject<KubeJob> {
  static isNamespaced = true;

  get spec() {
    return this.jsonData.spec;
  }

  get status() {
    return this.jsonData.status;
  }
}

export class DistTrainJob extends Job {
  static kind = 'DistTrainJob';
  static apiName = 'disttrainjobs';
  static apiVersion = 'disttrain.io/v1alpha1';

  static get detailsRoute() {
    return 'disttrain-job';
  }
}

export class ServedTFJob extends Job {
  static kind = 'TFJob';
  static apiName = 'tfjobs';
  static apiVersion = 'kubeflow.org/v1';

  static get detailsRoute() {
    return 'disttrain-tfjob';
  }
}

export type AnyJob = DistTrainJob | ServedTFJob;
