import { Table } from '@mantine/core'
import type { Schemas } from '../api/client'
import { quotaAmount, quotaLabel, quotaScope } from '../quota'

type QuotaLine = Schemas['PlacementCheckOutput']['quota'][number]

/** A launch check's quota lines (`quota` of `POST /instances/check/`, `/clusters/check/`, `/leases/check/`): each
 * limit with what is used, what the create adds and the limit, in words with units; an exceeded line in red.
 * `used`: the heading of the used column (a lease's is counted at the busiest moment of its window). */
export function QuotaTable({ lines, label, used = 'Used', adds }: {
  lines: QuotaLine[]
  label: string
  used?: string
  adds: string
}) {
  return (
    <Table aria-label={label} fz="sm">
      <Table.Thead>
        <Table.Tr>
          <Table.Th>Quota</Table.Th>
          <Table.Th>{used}</Table.Th>
          <Table.Th>{adds}</Table.Th>
          <Table.Th>Limit</Table.Th>
        </Table.Tr>
      </Table.Thead>
      <Table.Tbody>
        {lines.map((q) => (
          <Table.Tr key={`${q.scope}:${q.resource}`} c={q.exceeded ? 'red.8' : undefined}>
            <Table.Td>
              {quotaLabel(q.resource)} ({quotaScope(q.scope)}){q.exceeded ? ' — exceeded' : ''}
            </Table.Td>
            <Table.Td>{quotaAmount(q.resource, q.used)}</Table.Td>
            <Table.Td>+{quotaAmount(q.resource, q.requested)}</Table.Td>
            <Table.Td>{quotaAmount(q.resource, q.limit)}</Table.Td>
          </Table.Tr>
        ))}
      </Table.Tbody>
    </Table>
  )
}
