import { useDebouncedValue } from '@mantine/hooks'
import { useState } from 'react'

export type FilterValues = Record<string, string | null>

/**
 * A list's filters, named by the API's query parameters (`status`, `name_contains`, ...; a value's type is the
 * parameter's, e.g. `null as Status | null`): `values` as the controls show them, `query` the non-empty ones as sent (typing is debounced by `delay` ms, so a name search asks once the
 * typing pauses), `active` whether any differs from `initial`, `clear()` back to `initial`. Put `query` into the
 * list's query key (a `usePaged` list goes back to its first page when its key changes).
 */
export function useListFilters<F extends FilterValues>(initial: F, delay = 300) {
  const [values, setValues] = useState<F>(initial)
  const [debounced] = useDebouncedValue(values, delay)
  const applied = clearedNow(values, initial) ? values : debounced
  const query: { [K in keyof F]?: NonNullable<F[K]> } = {}
  for (const [key, value] of Object.entries(applied)) {
    const v = typeof value === 'string' ? value.trim() : value
    if (v) query[key as keyof F] = v as NonNullable<F[keyof F]>
  }
  return {
    values,
    query,
    active: Object.keys(initial).some((key) => (values[key] ?? '') !== (initial[key] ?? '')),
    set: (key: keyof F, value: string | null) => setValues((current) => ({ ...current, [key]: value })),
    clear: () => setValues(initial),
  }
}

export type ListFilters<F extends FilterValues = FilterValues> = ReturnType<typeof useListFilters<F>>

/** What a filter control needs of `useListFilters` (any filters). */
export interface FilterControl {
  values: FilterValues
  set(key: string, value: string | null): void
}

/** A clear (every value back to the initial one) applies at once, without waiting for the debounce. */
function clearedNow(values: FilterValues, initial: FilterValues): boolean {
  return Object.keys(initial).every((key) => (values[key] ?? '') === (initial[key] ?? ''))
}
