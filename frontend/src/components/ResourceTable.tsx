import { Button, Table, type TableTdProps } from '@mantine/core'
import type { ReactNode } from 'react'
import { EmptyState } from './EmptyState'
import { Pager } from './Pager'

export interface Column<T> {
  header: ReactNode
  cell: (row: T) => ReactNode
  /** props of the cell, e.g. `{ style: { whiteSpace: 'nowrap' } }` */
  td?: TableTdProps
}

/** What a list query tells the table: whether it answered, and (for a `usePaged` list) its pager. */
export interface ListState {
  isSuccess: boolean
  hasPrevious?: boolean
  hasNext?: boolean
  pageNumber?: number
  goNext?: () => void
  goPrevious?: () => void
  isFetching?: boolean
}

/** The filters of a list: when `active` and nothing matches, the empty state says so and offers to clear them. */
export interface ListFilterState {
  active: boolean
  clear: () => void
}

/** A table's label as the plural in a sentence: words in lower case, acronyms kept ("VPCs", "SSH keys",
 * "Floating IPs" → "floating IPs"). */
export function plural(label: string): string {
  return label.split(' ').map((w) => ((w.match(/[A-Z]/g) ?? []).length > 1 ? w : w.toLowerCase())).join(' ')
}

/** The empty state of a filtered list: nothing matches the filters, and a button that clears them. */
export function NoMatch({ noun, filters }: { noun: string; filters: ListFilterState }) {
  return (
    <EmptyState title={`No ${noun} match the filters`}
      action={<Button variant="default" onClick={filters.clear}>Clear filters</Button>}>
      Change or clear the filters to see the others.
    </EmptyState>
  )
}

/**
 * A list of resources as a table named `label`: one column per `columns` entry, a last right-aligned column of
 * `actions` (its header hidden but read out) when given, and the pager of a server-paged `list`. When the list
 * answered with nothing (on its first page) it shows `empty` instead: what is missing and what to do next; or,
 * with `filters` active, that nothing matches and a button that clears them.
 */
export function ResourceTable<T>({ label, rows, rowKey, columns, actions, list, empty, filters, noun, rowProps,
  striped = true, highlightOnHover = true }: {
  label: string
  rows: T[]
  rowKey: (row: T) => string
  columns: Column<T>[]
  actions?: (row: T) => ReactNode
  list: ListState
  empty: { title: string; text: ReactNode; action?: ReactNode }
  filters?: ListFilterState
  /** the plural shown when nothing matches the filters, e.g. "instances"; default: `label` in lower case */
  noun?: string
  rowProps?: (row: T) => Record<string, unknown>
  striped?: boolean
  highlightOnHover?: boolean
}) {
  const isEmpty = list.isSuccess && rows.length === 0 && !list.hasPrevious
  let body: ReactNode
  if (isEmpty && filters?.active) {
    body = <NoMatch noun={noun ?? plural(label)} filters={filters} />
  } else if (isEmpty) {
    body = <EmptyState title={empty.title} action={empty.action}>{empty.text}</EmptyState>
  } else {
    body = (
      <Table striped={striped} highlightOnHover={highlightOnHover} aria-label={label}>
        <Table.Thead>
          <Table.Tr>
            {columns.map((c, i) => <Table.Th key={i}>{c.header}</Table.Th>)}
            {actions && (
              <Table.Th>
                <span className="visually-hidden">Actions</span>
              </Table.Th>
            )}
          </Table.Tr>
        </Table.Thead>
        <Table.Tbody>
          {rows.map((row) => (
            <Table.Tr key={rowKey(row)} {...rowProps?.(row)}>
              {columns.map((c, i) => <Table.Td key={i} {...c.td}>{c.cell(row)}</Table.Td>)}
              {actions && <Table.Td ta="right">{actions(row)}</Table.Td>}
            </Table.Tr>
          ))}
        </Table.Tbody>
      </Table>
    )
  }
  return (
    <>
      {body}
      {list.pageNumber !== undefined && (
        <Pager pageNumber={list.pageNumber} hasNext={Boolean(list.hasNext)} hasPrevious={Boolean(list.hasPrevious)}
          onNext={() => list.goNext?.()} onPrevious={() => list.goPrevious?.()} loading={list.isFetching} />
      )}
    </>
  )
}
