import { Group, Select, TextInput } from '@mantine/core'
import type { ReactNode } from 'react'
import type { FilterControl as ListFilters } from '../hooks/useListFilters'

/** The filter controls of a list, in a row named "Filter <what>" (a search landmark). */
export function FilterBar({ label, children }: { label: string; children: ReactNode }) {
  return (
    <Group gap="sm" role="search" aria-label={label} align="flex-end">
      {children}
    </Group>
  )
}

/** A free-text filter (e.g. the API's `name_contains`): sent once typing pauses. */
export function SearchFilter({ filters, param = 'name_contains', label = 'Search by name', placeholder = 'Name contains…', w = 220 }: {
  filters: ListFilters
  param?: string
  label?: string
  placeholder?: string
  w?: number
}) {
  return (
    <TextInput aria-label={label} placeholder={placeholder} type="search" w={w} value={filters.values[param] ?? ''}
      onChange={(e) => filters.set(param, e.currentTarget.value)} />
  )
}

/** A filter over the API's fixed values (e.g. `status`): "Any …" when cleared. */
export function ChoiceFilter({ filters, param, label, placeholder, data, w = 180 }: {
  filters: ListFilters
  param: string
  label: string
  placeholder: string
  data: string[] | { value: string; label: string }[]
  w?: number
}) {
  return (
    <Select aria-label={label} placeholder={placeholder} clearable data={data} w={w} value={filters.values[param] ?? null}
      onChange={(v) => filters.set(param, v)} />
  )
}
