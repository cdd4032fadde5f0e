import { act, renderHook, waitFor } from '@testing-library/react'
import type { ReactNode } from 'react'
import { MemoryRouter, useLocation } from 'react-router'
import { describe, expect, it } from 'vitest'
import { useListFilters } from './useListFilters'

function wrapper(start: string) {
  return ({ children }: { children: ReactNode }) => <MemoryRouter initialEntries={[start]}>{children}</MemoryRouter>
}

describe('useListFilters in the URL', () => {
  it('starts from the URL and writes the applied filters back to it', async () => {
    const { result } = renderHook(() => ({
      filters: useListFilters({ status: null as string | null, name_contains: '' }, 10),
      location: useLocation(),
    }), { wrapper: wrapper('/instances?status=active&page=x') })
    expect(result.current.filters.values.status).toBe('active')
    expect(result.current.filters.query).toEqual({ status: 'active' })
    act(() => result.current.filters.set('name_contains', 'web'))
    await waitFor(() => expect(result.current.location.search).toBe('?status=active&page=x&name_contains=web'))
    act(() => result.current.filters.clear())
    await waitFor(() => expect(result.current.location.search).toBe('?page=x'))   // other parameters are kept
  })

  it('keeps two lists of one page apart with a prefix', async () => {
    const { result } = renderHook(() => ({
      filters: useListFilters({ name_contains: '' }, 10, 'ib_'),
      location: useLocation(),
    }), { wrapper: wrapper('/networking?name_contains=vpc&ib_name_contains=train') })
    expect(result.current.filters.values.name_contains).toBe('train')
  })
})
