import { useQuery } from '@tanstack/react-query'
import { api, unwrap, type Flavor, type Image } from '../api/client'

/** Every flavor offered to the caller (one page of up to 500: a catalog, not a tenant's list). */
export const flavorsQuery = {
  queryKey: ['flavors'],
  queryFn: () => unwrap(api.GET('/api/v1/flavors/', { params: { query: { page_size: 500 } } })),
  staleTime: 5 * 60_000,
}

export function useFlavors() {
  return useQuery({ ...flavorsQuery, select: (page) => page.results.filter((f) => f.is_active) })
}

export function useImages() {
  return useQuery({
    queryKey: ['images'],
    queryFn: () => unwrap(api.GET('/api/v1/images/', { params: { query: { page_size: 500 } } })),
    staleTime: 5 * 60_000,
    select: (page) => page.results.filter((i) => i.is_active),
  })
}

export function byId<T extends { id: string }>(items: T[] | undefined): Map<string, T> {
  return new Map((items ?? []).map((item) => [item.id, item]))
}

/** "8× H100-SXM5-80GB", "MIG 3g.40gb on H100-SXM5-80GB", "CPU only". */
export function gpuLabel(flavor: Flavor): string {
  if (!flavor.gpu_model || flavor.gpu_form === 'none') return 'CPU only'
  if (flavor.gpu_form === 'mig') return `MIG ${flavor.mig_profile} on ${flavor.gpu_model}`
  if (flavor.gpu_form === 'vgpu') return `vGPU ${flavor.vgpu_type} on ${flavor.gpu_model}`
  if (flavor.gpu_form === 'share') return `${(flavor.share_milli / 1000).toFixed(2)} of a ${flavor.gpu_model}`
  return `${flavor.gpu_count}× ${flavor.gpu_model}`
}

export function imageLabel(image: Image | undefined): string {
  return image ? `${image.name} (${image.os} ${image.os_version})` : '—'
}

export function sizeLabel(flavor: Flavor): string {
  return `${flavor.vcpus} vCPU · ${Math.round(flavor.memory_mib / 1024)} GiB RAM · ${flavor.disk_gib} GiB disk`
}
