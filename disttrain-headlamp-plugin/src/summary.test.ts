import { describe, expect, it } from 'vitest';
import { formatG4, JobData, summary } from './summary';

// The fixtures disttrain/summary.py is tested against too (tests/unit/core/test_summary.py): both ports must
// say the same of every job.
const fixtures = import.meta.glob('../../tests/fixtures/summaries/*.json', {
  eager: true,
  import: 'default',
}) as Record<string, { about: string; job: JobData; summary: ReturnType<typeof summary> }>;

describe('a job in a few words, as disttrain jobs get and the dashboard say it', () => {
  it('finds the shared fixtures', () => {
    expect(Object.keys(fixtures).length).toBeGreaterThanOrEqual(4);
  });

  it.each(Object.entries(fixtures))('sums up %s as disttrain_core.summary does', (_, fixture) => {
    expect(summary(fixture.job)).toEqual(fixture.summary);
  });

  it("writes numbers as Python's .4g does", () => {
    expect(
      [
        0.3125, 0.912345, 1, 0.0001, 0.00001234567, 123456.7, 9999.5, 0, -2.5e-7, 0.40625, 0.40635,
      ].map(formatG4)
    ).toEqual([
      '0.3125',
      '0.9123',
      '1',
      '0.0001',
      '1.235e-05',
      '1.235e+05',
      '1e+04',
      '0',
      '-2.5e-07',
      '0.4062',
      '0.4063',
    ]);
  });
});
