// disttrain in Headlamp: DistTrainJobs (and the TFJobs disttrain serves) with the columns of
// `disttrain jobs get` and the dashboard, a page per job, links to its pods' logs and its TensorBoard.
// Read-only: no view here edits or deletes a job.
import { registerRoute, registerSidebarEntry } from '@kinvolk/headlamp-plugin/lib';
import {
  ConditionsTable,
  DetailsGrid,
  Link,
  ResourceListView,
  SectionBox,
  SimpleTable,
} from '@kinvolk/headlamp-plugin/lib/CommonComponents';
import { useParams } from 'react-router-dom';
import { AnyJob, DistTrainJob, ServedTFJob } from './jobs';
import {
  checkpointText,
  etaText,
  evaluationText,
  keptLogCommand,
  phaseText,
  progressText,
  queueText,
  readyText,
  ReplicaPod,
  replicaPods,
  replicasText,
  restartsText,
  tensorboardCommand,
} from './summary';

const COLUMNS = [
  'name',
  'namespace',
  { id: 'phase', label: 'Phase', getValue: (job: AnyJob) => phaseText(job.jsonData) },
  { id: 'ready', label: 'Ready', getValue: (job: AnyJob) => readyText(job.jsonData) },
  { id: 'restarts', label: 'Restarts', getValue: (job: AnyJob) => restartsText(job.jsonData) },
  { id: 'progress', label: 'Progress', getValue: (job: AnyJob) => progressText(job.jsonData) },
  { id: 'eta', label: 'Time left', getValue: (job: AnyJob) => etaText(job.jsonData) },
  { id: 'queue', label: 'Queue', getValue: (job: AnyJob) => queueText(job.jsonData) },
  'age',
] as const;

function JobList(props: {
  title: string;
  resourceClass: typeof DistTrainJob | typeof ServedTFJob;
}) {
  return (
    <ResourceListView
      title={props.title}
      resourceClass={props.resourceClass}
      columns={[...COLUMNS]}
      enableRowActions={false}
      enableRowSelection={false}
      headerProps={{ titleSideActions: [] }}
      id={`disttrain-${props.resourceClass.apiName}`}
    />
  );
}

function JobDetails(props: { resourceClass: typeof DistTrainJob | typeof ServedTFJob }) {
  const { namespace, name } = useParams<{ namespace: string; name: string }>();
  return (
    <DetailsGrid
      resourceType={props.resourceClass}
      name={name}
      namespace={namespace}
      noDefaultActions
      withEvents
      extraInfo={(job: AnyJob) =>
        job && [
          { name: 'Phase', value: phaseText(job.jsonData) },
          { name: 'Strategy', value: job.spec.strategy ?? '-' },
          { name: 'Replicas (ready)', value: replicasText(job.jsonData) },
          { name: 'Restarts', value: restartsText(job.jsonData) },
          { name: 'Progress', value: progressText(job.jsonData) },
          { name: 'Time left', value: etaText(job.jsonData) },
          { name: 'Checkpoint', value: checkpointText(job.jsonData) },
          { name: 'Evaluation', value: evaluationText(job.jsonData) },
          { name: 'Queue', value: queueText(job.jsonData) },
          {
            name: 'TensorBoard',
            value: job.status?.tensorboard ? (
              <>
                {job.status.tensorboard.url} in the cluster; from your machine:{' '}
                <code>{tensorboardCommand(job.jsonData)}</code>
              </>
            ) : (
              'none: spec.tensorboard runs one'
            ),
          },
        ]
      }
      extraSections={(job: AnyJob) =>
        job && [
          {
            id: 'disttrain-conditions',
            section: (
              <SectionBox title="Conditions">
                <ConditionsTable resource={job.jsonData} showLastUpdate={false} />
              </SectionBox>
            ),
          },
          {
            id: 'disttrain-logs',
            section: (
              <SectionBox title="Pods and logs">
                <SimpleTable
                  columns={[
                    {
                      label: 'Pod (its page shows its log)',
                      getter: (replica: ReplicaPod) => (
                        <Link
                          routeName="pod"
                          params={{ namespace: job.getNamespace(), name: replica.pod }}
                        >
                          {replica.pod}
                        </Link>
                      ),
                    },
                    {
                      label: 'Every attempt, kept after the pod',
                      getter: (replica: ReplicaPod) => (
                        <code>{keptLogCommand(job.jsonData, replica.replica)}</code>
                      ),
                    },
                  ]}
                  data={replicaPods(job.jsonData)}
                />
              </SectionBox>
            ),
          },
        ]
      }
    />
  );
}

registerSidebarEntry({
  parent: null,
  name: 'disttrain',
  label: 'disttrain',
  url: '/disttrain/jobs',
  icon: 'mdi:brain',
});
registerSidebarEntry({
  parent: 'disttrain',
  name: 'disttrain-jobs',
  label: 'DistTrainJobs',
  url: '/disttrain/jobs',
});
registerSidebarEntry({
  parent: 'disttrain',
  name: 'disttrain-tfjobs',
  label: 'TFJobs',
  url: '/disttrain/tfjobs',
});

registerRoute({
  path: '/disttrain/jobs',
  sidebar: 'disttrain-jobs',
  name: 'disttrain-jobs',
  exact: true,
  component: () => <JobList title="DistTrainJobs" resourceClass={DistTrainJob} />,
});
registerRoute({
  path: '/disttrain/jobs/:namespace/:name',
  sidebar: 'disttrain-jobs',
  name: 'disttrain-job',
  exact: true,
  component: () => <JobDetails resourceClass={DistTrainJob} />,
});
registerRoute({
  path: '/disttrain/tfjobs',
  sidebar: 'disttrain-tfjobs',
  name: 'disttrain-tfjobs',
  exact: true,
  component: () => <JobList title="TFJobs (served by disttrain)" resourceClass={ServedTFJob} />,
});
registerRoute({
  path: '/disttrain/tfjobs/:namespace/:name',
  sidebar: 'disttrain-tfjobs',
  name: 'disttrain-tfjob',
  exact: true,
  component: () => <JobDetails resourceClass={ServedTFJob} />,
});
