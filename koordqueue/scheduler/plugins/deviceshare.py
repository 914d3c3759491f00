"""deviceshare: Volcano's shared GPUs (its plugin of that name, v1.15.1) — GPU sharing by
memory and whole GPUs by number (gpushare), and vGPUs split by count, memory and cores.

As in Volcano:
- `deviceshare.GPUSharingEnable`, `deviceshare.GPUNumberEnable` and `deviceshare.VGPUEnable`
  turn each device on (all off by default: the plugin then does nothing); sharing and number
  cannot both be on, nor either with vGPU (Volcano exits; here a session warning names the
  pair and the second is ignored);
- the **predicate** refuses a node whose GPUs cannot take the pod (no GPU with the memory
  free, too few idle GPUs, no vGPU fit), naming the device in the reason; a node without
  the device is left to the resource fit (its extended resources);
- the **node score** (`deviceshare.ScheduleWeight` > 0) is the vGPU score under
  `deviceshare.SchedulePolicy` (binpack: how full the GPUs' memory would be; spread: 0, as
  v1.15.1 asks for idle GPUs once the pod is counted on them), rounded, times the weight;
  gpushare scores 0; the policy also orders the GPUs a pod is given (devices/vgpu.py);
- `deviceshare.GPUExclusiveRules` (v1.15): pods matching one label rule never share a vGPU
  card (devices/gpu_exclusive.py), in the predicate, the score and allocate alike;
- **allocate** gives the pod its GPUs in the session (the next pod sees them taken),
  **deallocate** gives them back (an evicted pod's too); the pod annotations Volcano writes
  (`volcano.sh/gpu-index`; `volcano.sh/vgpu-ids-new` and the rest) go with the bind
  (`Session.bind_annotations`). A pod that already carries vGPUs of the node
  (`volcano.sh/vgpu-node`, e.g. a victim whose eviction is undone) takes those back and is
  given none anew.

Device state is built when the session opens, only for nodes whose device plugin wrote
something (`NodeInfo.devices`), from the pods placed there, Releasing pods not counted (their
GPUs are free, as in v1.15.1, so a preemptor can be given them); a pod that asks for no
device costs one attribute check per query (its predicate and score answer None).

Where this differs from Volcano, and why:
- Volcano's Release also strips the vGPU annotations off a pod whose `volcano.sh/bind-phase`
  is not "success" (a running victim's too): the scheduler writes pod annotations only with a
  bind, so a victim keeps them.
- A victim whose eviction is undone gets back exactly the GPUs its annotations name. Volcano
  re-adds them too, but then gives a gpushare pod, or a vGPU pod without
  `volcano.sh/vgpu-node`, more GPUs anew; preempt's dry runs here evict and undo on the
  session itself (Volcano's run on copies), so they must leave the GPUs as they were.
- `deviceshare.NodeLockEnable` is read and has no effect: binds here are serialised by the
  scheduler, so there is no second scheduler to lock the node against.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from koordqueue.scheduler.api import NodeInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.api import device_names as dn
from koordqueue.scheduler.api.devices import PodDevices
from koordqueue.scheduler.devices import gpushare, vgpu
from koordqueue.scheduler.devices.gpu_exclusive import ExclusiveCards, Fit, load_rules
from koordqueue.scheduler.devices.gpushare import GpuShareDevices
from koordqueue.scheduler.devices.vgpu import VGpuDevices
from koordqueue.scheduler.framework.interface import Arguments, ExtensionPoint, Plugin
from koordqueue.scheduler.framework.placement import (
    RESOLVABLE_BY_EVICTION,
    BoolArray,
    FloatArray,
    Scorer,
)
from koordqueue.scheduler.framework.session import EventHandler, Session
from koordqueue.scheduler.interpod import plugin_enabled

_HOLDING: Final = frozenset({
    TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING,
})
"""Statuses whose pods hold their GPUs when a session opens (Volcano v1.15.1's NodeInfo adds
no device for Releasing and Pipelined tasks)."""
_RESTORED: Final = frozenset({TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING})
"""Statuses an allocate event finds only on a pod whose eviction was undone."""


class DeviceShareArguments:
    """The plugin's arguments as Volcano reads them, conflicts resolved."""

    __slots__ = (
        "exclusive_rules", "gpu_number", "gpu_sharing", "node_lock", "policy", "vgpu",
        "warnings", "weight",
    )

    def __init__(self, arguments: Arguments) -> None:
        self.gpu_sharing = arguments.get_bool(dn.GPU_SHARING_ENABLE, False)
        self.gpu_number = arguments.get_bool(dn.GPU_NUMBER_ENABLE, False)
        self.vgpu = arguments.get_bool(dn.VGPU_ENABLE, False)
        self.node_lock = arguments.get_bool(dn.NODE_LOCK_ENABLE, False)
        self.policy = arguments.get_str(dn.SCHEDULE_POLICY, "")
        self.weight = arguments.get_int(dn.SCHEDULE_WEIGHT, 0)
        self.exclusive_rules, self.warnings = load_rules(arguments)
        if self.gpu_sharing and self.gpu_number:
            self._conflict(dn.GPU_SHARING_ENABLE, dn.GPU_NUMBER_ENABLE)
            self.gpu_number = False
        if (self.gpu_sharing or self.gpu_number) and self.vgpu:
            first = dn.GPU_SHARING_ENABLE if self.gpu_sharing else dn.GPU_NUMBER_ENABLE
            self._conflict(first, dn.VGPU_ENABLE)
            self.vgpu = False

    def _conflict(self, first: str, second: str) -> None:
        self.warnings.append(dn.CONFLICTING_MODES.format(first=first, second=second))

    @property
    def gpushare(self) -> bool:
        return self.gpu_sharing or self.gpu_number


class DeviceSharePlugin(Plugin):
    """Registers the device predicate, the vGPU score and the allocate/deallocate handler."""

    name = dn.PLUGIN_NAME
    quiet = True

    def __init__(self, arguments: Arguments | None = None) -> None:
        super().__init__(arguments)
        self.args = DeviceShareArguments(self.arguments)
        self.state: DeviceState | None = None

    def on_session_open(self, session: Session) -> None:
        args = self.args
        session.warnings.extend(args.warnings)
        if not (args.gpushare or args.vgpu):
            return
        state = self.state = DeviceState(session, args)
        if not (state.gpushare or state.vgpu):
            return  # no node has a device: nothing can be refused, scored or given
        if plugin_enabled(session, self.name, ExtensionPoint.PREDICATE):
            session.placement.add_dynamic_predicate(state.predicate, state.explain)
        if (
            args.vgpu and args.weight > 0 and state.vgpu
            and plugin_enabled(session, self.name, ExtensionPoint.NODE_ORDER)
        ):
            session.placement.add_dynamic_score(state.scorer)
        session.add_event_handler(
            self.name, EventHandler(allocate=state.allocate, deallocate=state.deallocate)
        )


class DeviceState:
    """One session's GPUs per node (Volcano keeps them in NodeInfo.Others)."""

    def __init__(self, session: Session, args: DeviceShareArguments) -> None:
        self.session = session
        self.args = args
        self.size = session.tensor.size
        self.gpushare: dict[str, tuple[int, GpuShareDevices]] = {}
        self.vgpu: dict[str, tuple[int, VGpuDevices]] = {}
        self.exclusive: dict[str, ExclusiveCards] = {}
        """Nodes whose vGPUs the GPU exclusivity rules govern (all, when there are rules)."""
        for node in session.node_list:
            if node.devices is not None:
                self._open_node(node)

    def _open_node(self, node: NodeInfo) -> None:
        source = node.devices
        assert source is not None
        share = GpuShareDevices.from_source(node.name, source) if self.args.gpushare else None
        virtual = VGpuDevices.from_source(node.name, source) if self.args.vgpu else None
        if share is not None:
            self.gpushare[node.name] = (node.index, share)
        exclusive: ExclusiveCards | None = None
        if virtual is not None:
            self.vgpu[node.name] = (node.index, virtual)
            if self.args.exclusive_rules:
                exclusive = ExclusiveCards(virtual, self.args.exclusive_rules)
                self.exclusive[node.name] = exclusive
        if share is None and virtual is None:
            return
        for task in node.tasks.values():
            devices = task.devices
            if devices is None:
                continue
            if task.status not in _HOLDING:
                if exclusive is not None and task.status is TaskStatus.RELEASING:
                    ids = vgpu.decode(devices.annotations.get(dn.VGPU_IDS, ""))
                    exclusive.track_annotated(task.uid, task.labels, ids)
                continue
            if share is not None:
                share.add(task.uid, devices, devices.gpu_index())
            if virtual is not None:
                self._restore(task, virtual, exclusive)

    # --- which devices a pod asks for -----------------------------------------------------
    def _share_request(self, devices: PodDevices) -> bool:
        return gpushare.has_request(devices, self.args.gpu_sharing, self.args.gpu_number)

    def _vgpu_request(self, devices: PodDevices) -> bool:
        return self.args.vgpu and vgpu.has_request(devices)

    @staticmethod
    def _restore(task: TaskInfo, virtual: VGpuDevices, exclusive: ExclusiveCards | None) -> None:
        """The placed pod holds the GPUs its `volcano.sh/vgpu-ids-new` names."""
        devices = task.devices
        assert devices is not None
        group = vgpu.pod_group_key(task.namespace, devices.annotations)
        virtual.add(task.uid, vgpu.decode(devices.annotations.get(dn.VGPU_IDS, "")), group)
        if exclusive is not None:
            exclusive.track(task.uid, task.labels)

    def _vgpu_fit(
        self, task: TaskInfo, name: str, virtual: VGpuDevices, commit: str | None = None,
    ) -> Fit:
        """The vGPU fit, with the exclusivity rules where they govern the node."""
        devices = task.devices
        assert devices is not None
        group = vgpu.pod_group_key(task.namespace, devices.annotations)
        exclusive = self.exclusive.get(name)
        if exclusive is None:
            return virtual.fit(devices, self.args.policy, group=group, commit=commit)
        return exclusive.fit(
            devices, task.labels, self.args.policy, group=group, commit=commit)

    # --- predicate ------------------------------------------------------------------------
    def refusal(self, task: TaskInfo, name: str) -> str | None:
        """Why node `name`'s devices cannot take the task, or None."""
        devices = task.devices
        if devices is None:
            return None
        share = self.gpushare.get(name)
        if share is not None and self._share_request(devices):
            reason = share[1].filter(devices, self.args.gpu_sharing, self.args.gpu_number)
            if reason is not None:
                return reason
        virtual = self.vgpu.get(name)
        if virtual is not None and self._vgpu_request(devices):
            fitted = self._vgpu_fit(task, name, virtual[1])
            if isinstance(fitted, str):
                return dn.VGPU_REFUSED.format(detail=fitted)
        return None

    def predicate(self, task: TaskInfo) -> BoolArray | None:
        devices = task.devices
        if devices is None:
            return None
        share = self._share_request(devices)
        virtual = self._vgpu_request(devices)
        if not (share or virtual):
            return None
        mask = np.ones(self.size, dtype=bool)
        names = set(self.gpushare if share else ()) | set(self.vgpu if virtual else ())
        for name in names:
            if self.refusal(task, name) is not None:
                index = (self.gpushare.get(name) or self.vgpu[name])[0]
                mask[index] = False
        return mask

    def explain(self, task: TaskInfo, node: NodeInfo) -> str | None:
        return self.refusal(task, node.name)

    # Volcano's device refusal is Unschedulable: a victim's eviction frees its GPUs (v1.15.1
    # for vGPUs), so preempt and reclaim keep the node as a candidate
    setattr(predicate, RESOLVABLE_BY_EVICTION, True)

    # --- score ----------------------------------------------------------------------------
    def scorer(self, task: TaskInfo) -> Scorer | None:
        devices = task.devices
        if devices is None or not self._vgpu_request(devices):
            return None
        weight = self.args.weight

        def score(eff: FloatArray) -> FloatArray:
            out = np.zeros(self.size, dtype=np.float64)
            for name, (index, virtual) in self.vgpu.items():
                if eff[index] == -np.inf:
                    continue
                fitted = self._vgpu_fit(task, name, virtual)
                if not isinstance(fitted, str):
                    out[index] = vgpu.node_score(fitted[1], weight)
            return out

        return score

    # --- allocate / deallocate ------------------------------------------------------------
    def allocate(self, task: TaskInfo) -> None:
        devices = task.devices
        name = task.node_name
        if devices is None or name is None:
            return
        # a placed pod's eviction undone: it takes back the GPUs its annotations name
        undone = task.status in _RESTORED
        given: dict[str, str] = {}
        share = self.gpushare.get(name)
        if share is not None and self._share_request(devices):
            if undone:
                share[1].add(task.uid, devices, devices.gpu_index())
            else:
                ids = share[1].allocate(task.uid, devices)
                if ids:
                    given.update(gpushare.bind_annotations(ids))
        virtual = self.vgpu.get(name)
        if virtual is not None and self._vgpu_request(devices):
            if undone or vgpu.assigned_on(devices.annotations, name):
                # Volcano: NodeInfo re-adds the pod from its annotation (not when Pipelined)
                # and Allocate skips it (alreadyAssignedOnNode)
                if task.status is not TaskStatus.PIPELINED:
                    self._restore(task, virtual[1], self.exclusive.get(name))
            else:
                fitted = self._vgpu_fit(task, name, virtual[1], commit=task.uid)
                if not isinstance(fitted, str):
                    given.update(vgpu.bind_annotations(name, fitted[0]))
        if given:
            self.session.bind_annotations[task.uid] = given

    def deallocate(self, task: TaskInfo) -> None:
        if task.devices is None:
            return
        for table in (self.gpushare, self.vgpu):
            for _index, devices in table.values():
                devices.remove(task.uid)
        for exclusive in self.exclusive.values():
            exclusive.untrack(task.uid)
        self.session.bind_annotations.pop(task.uid, None)
