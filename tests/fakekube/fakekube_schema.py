"""Field schemas of the Kubernetes 1.32 kinds that fakekube serves.

Written by hand from the Kubernetes API reference (k8s.io/api v0.32).  They
are used for three things:

* unknown-field detection (``fieldValidation=Strict`` / ``Warn`` and the
  always-on check of server-side apply), with the same field paths the real
  server prints;
* simple type checks (a string where an integer belongs, ...);
* list semantics: the keys of associative lists (``containers`` by ``name``,
  ``ports`` by ``containerPort``+``protocol``) for server-side apply, field
  paths and managedFields, and the strategic-merge-patch merge keys.

Status stanzas that only controllers write are declared ``ANY`` (accepted
as they are); everything a client writes is declared field by field.
"""

# Scalar types.  The string is the Go type name used in decoding errors.
S = "string"
I = "int32"
I64 = "int64"
B = "bool"
N = "float64"
Q = "quantity"        # resource.Quantity: string or number
IOS = "intorstring"   # intstr.IntOrString
T = "time"            # metav1.Time (RFC 3339 string or null)
ANY = "any"           # free-form JSON (RawExtension, FieldsV1, controller status)
BYTES = "bytes"       # []byte: base64 string


class O:
    """A struct: ``fields`` maps JSON names to types."""

    def __init__(self, go, fields):
        self.go = go
        self.fields = fields


class L:
    """A list.  ``keys`` are the list-map keys of server-side apply (None for
    an atomic list); ``smp`` is the strategic-merge-patch merge key (a field
    name), ``"$merge"`` for a primitive list merged as a set, or None for
    replace."""

    def __init__(self, elem, keys=None, smp=None):
        self.elem = elem
        self.keys = keys
        self.smp = smp


class M:
    """A map[string]elem."""

    def __init__(self, elem):
        self.elem = elem


def go_type(t):
    if isinstance(t, O):
        return "v1." + t.go
    if isinstance(t, L):
        return "[]" + go_type(t.elem)
    if isinstance(t, M):
        return "map[string]" + go_type(t.elem)
    return {Q: "resource.Quantity", IOS: "intstr.IntOrString", T: "v1.Time",
            ANY: "interface {}", BYTES: "[]uint8"}.get(t, t)


# ---------------------------------------------------------------- metav1

OwnerReference = O("OwnerReference", {
    "apiVersion": S, "kind": S, "name": S, "uid": S,
    "controller": B, "blockOwnerDeletion": B,
})

ManagedFieldsEntry = O("ManagedFieldsEntry", {
    "manager": S, "operation": S, "apiVersion": S, "time": T,
    "fieldsType": S, "fieldsV1": ANY, "subresource": S,
})

ObjectMeta = O("ObjectMeta", {
    "name": S, "generateName": S, "namespace": S, "selfLink": S, "uid": S,
    "resourceVersion": S, "generation": I64, "creationTimestamp": T,
    "deletionTimestamp": T, "deletionGracePeriodSeconds": I64,
    "labels": M(S), "annotations": M(S),
    "ownerReferences": L(OwnerReference, keys=("uid",), smp="uid"),
    "finalizers": L(S, smp="$merge"),
    "managedFields": L(ManagedFieldsEntry),
})

LabelSelectorRequirement = O("LabelSelectorRequirement", {
    "key": S, "operator": S, "values": L(S),
})
LabelSelector = O("LabelSelector", {
    "matchLabels": M(S),
    "matchExpressions": L(LabelSelectorRequirement),
})

Condition = O("Condition", {
    "type": S, "status": S, "observedGeneration": I64,
    "lastTransitionTime": T, "reason": S, "message": S,
})

# ---------------------------------------------------------------- core/v1: pod spec

LocalObjectReference = O("LocalObjectReference", {"name": S})
KeyToPath = O("KeyToPath", {"key": S, "path": S, "mode": I})
ObjectFieldSelector = O("ObjectFieldSelector", {"apiVersion": S, "fieldPath": S})
ResourceFieldSelector = O("ResourceFieldSelector", {
    "containerName": S, "resource": S, "divisor": Q,
})

EnvVarSource = O("EnvVarSource", {
    "fieldRef": ObjectFieldSelector,
    "resourceFieldRef": ResourceFieldSelector,
    "configMapKeyRef": O("ConfigMapKeySelector", {"name": S, "key": S, "optional": B}),
    "secretKeyRef": O("SecretKeySelector", {"name": S, "key": S, "optional": B}),
})
EnvVar = O("EnvVar", {"name": S, "value": S, "valueFrom": EnvVarSource})
EnvFromSource = O("EnvFromSource", {
    "prefix": S,
    "configMapRef": O("ConfigMapEnvSource", {"name": S, "optional": B}),
    "secretRef": O("SecretEnvSource", {"name": S, "optional": B}),
})

ContainerPort = O("ContainerPort", {
    "name": S, "hostPort": I, "containerPort": I, "protocol": S, "hostIP": S,
})

ResourceClaim = O("ResourceClaim", {"name": S, "request": S})
ResourceRequirements = O("ResourceRequirements", {
    "limits": M(Q), "requests": M(Q),
    "claims": L(ResourceClaim, keys=("name",)),
})
ContainerResizePolicy = O("ContainerResizePolicy", {"resourceName": S, "restartPolicy": S})

VolumeMount = O("VolumeMount", {
    "name": S, "readOnly": B, "recursiveReadOnly": S, "mountPath": S,
    "subPath": S, "mountPropagation": S, "subPathExpr": S,
})
VolumeDevice = O("VolumeDevice", {"name": S, "devicePath": S})

ExecAction = O("ExecAction", {"command": L(S)})
HTTPHeader = O("HTTPHeader", {"name": S, "value": S})
HTTPGetAction = O("HTTPGetAction", {
    "path": S, "port": IOS, "host": S, "scheme": S, "httpHeaders": L(HTTPHeader),
})
TCPSocketAction = O("TCPSocketAction", {"port": IOS, "host": S})
GRPCAction = O("GRPCAction", {"port": I, "service": S})
SleepAction = O("SleepAction", {"seconds": I64})

Probe = O("Probe", {
    "exec": ExecAction, "httpGet": HTTPGetAction, "tcpSocket": TCPSocketAction,
    "grpc": GRPCAction,
    "initialDelaySeconds": I, "timeoutSeconds": I, "periodSeconds": I,
    "successThreshold": I, "failureThreshold": I,
    "terminationGracePeriodSeconds": I64,
})
LifecycleHandler = O("LifecycleHandler", {
    "exec": ExecAction, "httpGet": HTTPGetAction, "tcpSocket": TCPSocketAction,
    "sleep": SleepAction,
})
Lifecycle = O("Lifecycle", {"postStart": LifecycleHandler, "preStop": LifecycleHandler})

SELinuxOptions = O("SELinuxOptions", {"user": S, "role": S, "type": S, "level": S})
WindowsSecurityContextOptions = O("WindowsSecurityContextOptions", {
    "gmsaCredentialSpecName": S, "gmsaCredentialSpec": S, "runAsUserName": S,
    "hostProcess": B,
})
SeccompProfile = O("SeccompProfile", {"type": S, "localhostProfile": S})
AppArmorProfile = O("AppArmorProfile", {"type": S, "localhostProfile": S})

SecurityContext = O("SecurityContext", {
    "capabilities": O("Capabilities", {"add": L(S), "drop": L(S)}),
    "privileged": B,
    "seLinuxOptions": SELinuxOptions,
    "windowsOptions": WindowsSecurityContextOptions,
    "runAsUser": I64, "runAsGroup": I64, "runAsNonRoot": B,
    "readOnlyRootFilesystem": B, "allowPrivilegeEscalation": B,
    "procMount": S,
    "seccompProfile": SeccompProfile,
    "appArmorProfile": AppArmorProfile,
})

_container_fields = {
    "name": S, "image": S, "command": L(S), "args": L(S), "workingDir": S,
    "ports": L(ContainerPort, keys=("containerPort", "protocol"), smp="containerPort"),
    "envFrom": L(EnvFromSource),
    "env": L(EnvVar, keys=("name",), smp="name"),
    "resources": ResourceRequirements,
    "resizePolicy": L(ContainerResizePolicy),
    "restartPolicy": S,
    "volumeMounts": L(VolumeMount, keys=("mountPath",), smp="mountPath"),
    "volumeDevices": L(VolumeDevice, keys=("devicePath",), smp="devicePath"),
    "livenessProbe": Probe, "readinessProbe": Probe, "startupProbe": Probe,
    "lifecycle": Lifecycle,
    "terminationMessagePath": S, "terminationMessagePolicy": S,
    "imagePullPolicy": S,
    "securityContext": SecurityContext,
    "stdin": B, "stdinOnce": B, "tty": B,
}
Container = O("Container", dict(_container_fields))
EphemeralContainer = O("EphemeralContainer", dict(_container_fields, targetContainerName=S))

SecretVolumeSource = O("SecretVolumeSource", {
    "secretName": S, "items": L(KeyToPath), "defaultMode": I, "optional": B,
})
ConfigMapVolumeSource = O("ConfigMapVolumeSource", {
    "name": S, "items": L(KeyToPath), "defaultMode": I, "optional": B,
})
DownwardAPIVolumeFile = O("DownwardAPIVolumeFile", {
    "path": S, "fieldRef": ObjectFieldSelector,
    "resourceFieldRef": ResourceFieldSelector, "mode": I,
})
TypedLocalObjectReference = O("TypedLocalObjectReference", {"apiGroup": S, "kind": S, "name": S})
PersistentVolumeClaimSpec = O("PersistentVolumeClaimSpec", {
    "accessModes": L(S),
    "selector": LabelSelector,
    "resources": O("VolumeResourceRequirements", {"limits": M(Q), "requests": M(Q)}),
    "volumeName": S, "storageClassName": S, "volumeMode": S,
    "dataSource": TypedLocalObjectReference,
    "dataSourceRef": O("TypedObjectReference", {"apiGroup": S, "kind": S, "name": S, "namespace": S}),
    "volumeAttributesClassName": S,
})
VolumeProjection = O("VolumeProjection", {
    "secret": O("SecretProjection", {"name": S, "items": L(KeyToPath), "optional": B}),
    "downwardAPI": O("DownwardAPIProjection", {"items": L(DownwardAPIVolumeFile)}),
    "configMap": O("ConfigMapProjection", {"name": S, "items": L(KeyToPath), "optional": B}),
    "serviceAccountToken": O("ServiceAccountTokenProjection", {
        "audience": S, "expirationSeconds": I64, "path": S}),
    "clusterTrustBundle": O("ClusterTrustBundleProjection", {
        "name": S, "signerName": S, "labelSelector": LabelSelector,
        "optional": B, "path": S}),
})

Volume = O("Volume", {
    "name": S,
    "hostPath": O("HostPathVolumeSource", {"path": S, "type": S}),
    "emptyDir": O("EmptyDirVolumeSource", {"medium": S, "sizeLimit": Q}),
    "gcePersistentDisk": O("GCEPersistentDiskVolumeSource", {
        "pdName": S, "fsType": S, "partition": I, "readOnly": B}),
    "awsElasticBlockStore": O("AWSElasticBlockStoreVolumeSource", {
        "volumeID": S, "fsType": S, "partition": I, "readOnly": B}),
    "gitRepo": O("GitRepoVolumeSource", {"repository": S, "revision": S, "directory": S}),
    "secret": SecretVolumeSource,
    "nfs": O("NFSVolumeSource", {"server": S, "path": S, "readOnly": B}),
    "iscsi": O("ISCSIVolumeSource", {
        "targetPortal": S, "iqn": S, "lun": I, "iscsiInterface": S, "fsType": S,
        "readOnly": B, "portals": L(S), "chapAuthDiscovery": B, "chapAuthSession": B,
        "secretRef": LocalObjectReference, "initiatorName": S}),
    "glusterfs": O("GlusterfsVolumeSource", {"endpoints": S, "path": S, "readOnly": B}),
    "persistentVolumeClaim": O("PersistentVolumeClaimVolumeSource", {"claimName": S, "readOnly": B}),
    "rbd": O("RBDVolumeSource", {
        "monitors": L(S), "image": S, "fsType": S, "pool": S, "user": S,
        "keyring": S, "secretRef": LocalObjectReference, "readOnly": B}),
    "flexVolume": O("FlexVolumeSource", {
        "driver": S, "fsType": S, "secretRef": LocalObjectReference,
        "readOnly": B, "options": M(S)}),
    "cinder": O("CinderVolumeSource", {
        "volumeID": S, "fsType": S, "readOnly": B, "secretRef": LocalObjectReference}),
    "cephfs": O("CephFSVolumeSource", {
        "monitors": L(S), "path": S, "user": S, "secretFile": S,
        "secretRef": LocalObjectReference, "readOnly": B}),
    "flocker": O("FlockerVolumeSource", {"datasetName": S, "datasetUUID": S}),
    "downwardAPI": O("DownwardAPIVolumeSource", {"items": L(DownwardAPIVolumeFile), "defaultMode": I}),
    "fc": O("FCVolumeSource", {
        "targetWWNs": L(S), "lun": I, "fsType": S, "readOnly": B, "wwids": L(S)}),
    "azureFile": O("AzureFileVolumeSource", {"secretName": S, "shareName": S, "readOnly": B}),
    "configMap": ConfigMapVolumeSource,
    "vsphereVolume": O("VsphereVirtualDiskVolumeSource", {
        "volumePath": S, "fsType": S, "storagePolicyName": S, "storagePolicyID": S}),
    "quobyte": O("QuobyteVolumeSource", {
        "registry": S, "volume": S, "readOnly": B, "user": S, "group": S, "tenant": S}),
    "azureDisk": O("AzureDiskVolumeSource", {
        "diskName": S, "diskURI": S, "cachingMode": S, "fsType": S, "readOnly": B, "kind": S}),
    "photonPersistentDisk": O("PhotonPersistentDiskVolumeSource", {"pdID": S, "fsType": S}),
    "projected": O("ProjectedVolumeSource", {"sources": L(VolumeProjection), "defaultMode": I}),
    "portworxVolume": O("PortworxVolumeSource", {"volumeID": S, "fsType": S, "readOnly": B}),
    "scaleIO": O("ScaleIOVolumeSource", {
        "gateway": S, "system": S, "secretRef": LocalObjectReference, "sslEnabled": B,
        "protectionDomain": S, "storagePool": S, "storageMode": S, "volumeName": S,
        "fsType": S, "readOnly": B}),
    "storageos": O("StorageOSVolumeSource", {
        "volumeName": S, "volumeNamespace": S, "fsType": S, "readOnly": B,
        "secretRef": LocalObjectReference}),
    "csi": O("CSIVolumeSource", {
        "driver": S, "readOnly": B, "fsType": S, "volumeAttributes": M(S),
        "nodePublishSecretRef": LocalObjectReference}),
    "ephemeral": O("EphemeralVolumeSource", {
        "volumeClaimTemplate": O("PersistentVolumeClaimTemplate", {
            "metadata": ObjectMeta, "spec": PersistentVolumeClaimSpec})}),
    "image": O("ImageVolumeSource", {"reference": S, "pullPolicy": S}),
})

NodeSelectorRequirement = O("NodeSelectorRequirement", {"key": S, "operator": S, "values": L(S)})
NodeSelectorTerm = O("NodeSelectorTerm", {
    "matchExpressions": L(NodeSelectorRequirement),
    "matchFields": L(NodeSelectorRequirement),
})
PodAffinityTerm = O("PodAffinityTerm", {
    "labelSelector": LabelSelector, "namespaces": L(S), "topologyKey": S,
    "namespaceSelector": LabelSelector, "matchLabelKeys": L(S), "mismatchLabelKeys": L(S),
})
WeightedPodAffinityTerm = O("WeightedPodAffinityTerm", {"weight": I, "podAffinityTerm": PodAffinityTerm})
_pod_affinity = {
    "requiredDuringSchedulingIgnoredDuringExecution": L(PodAffinityTerm),
    "preferredDuringSchedulingIgnoredDuringExecution": L(WeightedPodAffinityTerm),
}
Affinity = O("Affinity", {
    "nodeAffinity": O("NodeAffinity", {
        "requiredDuringSchedulingIgnoredDuringExecution": O("NodeSelector", {
            "nodeSelectorTerms": L(NodeSelectorTerm)}),
        "preferredDuringSchedulingIgnoredDuringExecution": L(O("PreferredSchedulingTerm", {
            "weight": I, "preference": NodeSelectorTerm})),
    }),
    "podAffinity": O("PodAffinity", dict(_pod_affinity)),
    "podAntiAffinity": O("PodAntiAffinity", dict(_pod_affinity)),
})

Toleration = O("Toleration", {
    "key": S, "operator": S, "value": S, "effect": S, "tolerationSeconds": I64,
})

PodSecurityContext = O("PodSecurityContext", {
    "seLinuxOptions": SELinuxOptions,
    "windowsOptions": WindowsSecurityContextOptions,
    "runAsUser": I64, "runAsGroup": I64, "runAsNonRoot": B,
    "supplementalGroups": L(I64), "supplementalGroupsPolicy": S,
    "fsGroup": I64,
    "sysctls": L(O("Sysctl", {"name": S, "value": S})),
    "fsGroupChangePolicy": S,
    "seccompProfile": SeccompProfile,
    "appArmorProfile": AppArmorProfile,
    "seLinuxChangePolicy": S,
})

PodSpec = O("PodSpec", {
    "volumes": L(Volume, keys=("name",), smp="name"),
    "initContainers": L(Container, keys=("name",), smp="name"),
    "containers": L(Container, keys=("name",), smp="name"),
    "ephemeralContainers": L(EphemeralContainer, keys=("name",), smp="name"),
    "restartPolicy": S,
    "terminationGracePeriodSeconds": I64,
    "activeDeadlineSeconds": I64,
    "dnsPolicy": S,
    "nodeSelector": M(S),
    "serviceAccountName": S,
    "serviceAccount": S,
    "automountServiceAccountToken": B,
    "nodeName": S,
    "hostNetwork": B, "hostPID": B, "hostIPC": B,
    "shareProcessNamespace": B,
    "securityContext": PodSecurityContext,
    "imagePullSecrets": L(LocalObjectReference, keys=("name",), smp="name"),
    "hostname": S, "subdomain": S,
    "affinity": Affinity,
    "schedulerName": S,
    "tolerations": L(Toleration),
    "hostAliases": L(O("HostAlias", {"ip": S, "hostnames": L(S)}), keys=("ip",), smp="ip"),
    "priorityClassName": S,
    "priority": I,
    "dnsConfig": O("PodDNSConfig", {
        "nameservers": L(S), "searches": L(S),
        "options": L(O("PodDNSConfigOption", {"name": S, "value": S}))}),
    "readinessGates": L(O("PodReadinessGate", {"conditionType": S})),
    "runtimeClassName": S,
    "enableServiceLinks": B,
    "preemptionPolicy": S,
    "overhead": M(Q),
    "topologySpreadConstraints": L(O("TopologySpreadConstraint", {
        "maxSkew": I, "topologyKey": S, "whenUnsatisfiable": S,
        "labelSelector": LabelSelector, "minDomains": I,
        "nodeAffinityPolicy": S, "nodeTaintsPolicy": S, "matchLabelKeys": L(S)}),
        keys=("topologyKey", "whenUnsatisfiable"), smp="topologyKey"),
    "setHostnameAsFQDN": B,
    "os": O("PodOS", {"name": S}),
    "hostUsers": B,
    "schedulingGates": L(O("PodSchedulingGate", {"name": S}), keys=("name",), smp="name"),
    "resourceClaims": L(O("PodResourceClaim", {
        "name": S, "resourceClaimName": S, "resourceClaimTemplateName": S}),
        keys=("name",), smp="name"),
    "resources": ResourceRequirements,
})

Pod = O("Pod", {
    "apiVersion": S, "kind": S, "metadata": ObjectMeta,
    "spec": PodSpec, "status": ANY,
})

PodTemplateSpec = O("PodTemplateSpec", {"metadata": ObjectMeta, "spec": PodSpec})

# ---------------------------------------------------------------- core/v1: others

Namespace = O("Namespace", {
    "apiVersion": S, "kind": S, "metadata": ObjectMeta,
    "spec": O("NamespaceSpec", {"finalizers": L(S)}),
    "status": O("NamespaceStatus", {
        "phase": S,
        "conditions": L(O("NamespaceCondition", {
            "type": S, "status": S, "lastTransitionTime": T, "reason": S, "message": S}),
            keys=("type",), smp="type"),
    }),
})

Secret = O("Secret", {
    "apiVersion": S, "kind": S, "metadata": ObjectMeta,
    "immutable": B, "data": M(BYTES), "stringData": M(S), "type": S,
})

ConfigMap = O("ConfigMap", {
    "apiVersion": S, "kind": S, "metadata": ObjectMeta,
    "immutable": B, "data": M(S), "binaryData": M(BYTES),
})

ServicePort = O("ServicePort", {
    "name": S, "protocol": S, "appProtocol": S, "port": I,
    "targetPort": IOS, "nodePort": I,
})
Service = O("Service", {
    "apiVersion": S, "kind": S, "metadata": ObjectMeta,
    "spec": O("ServiceSpec", {
        "ports": L(ServicePort, keys=("port", "protocol"), smp="port"),
        "selector": M(S),
        "clusterIP": S, "clusterIPs": L(S),
        "type": S, "externalIPs": L(S), "sessionAffinity": S,
        "loadBalancerIP": S, "loadBalancerSourceRanges": L(S),
        "externalName": S, "externalTrafficPolicy": S,
        "healthCheckNodePort": I, "publishNotReadyAddresses": B,
        "sessionAffinityConfig": O("SessionAffinityConfig", {
            "clientIP": O("ClientIPConfig", {"timeoutSeconds": I})}),
        "ipFamilies": L(S), "ipFamilyPolicy": S,
        "allocateLoadBalancerNodePorts": B, "loadBalancerClass": S,
        "internalTrafficPolicy": S, "trafficDistribution": S,
    }),
    "status": ANY,
})

ObjectReference = O("ObjectReference", {
    "kind": S, "namespace": S, "name": S, "uid": S, "apiVersion": S,
    "resourceVersion": S, "fieldPath": S,
})
Event = O("Event", {
    "apiVersion": S, "kind": S, "metadata": ObjectMeta,
    "involvedObject": ObjectReference,
    "reason": S, "message": S,
    "source": O("EventSource", {"component": S, "host": S}),
    "firstTimestamp": T, "lastTimestamp": T, "count": I,
    "type": S, "eventTime": T,
    "series": O("EventSeries", {"count": I, "lastObservedTime": T}),
    "action": S, "related": ObjectReference,
    "reportingComponent": S, "reportingInstance": S,
})

# ---------------------------------------------------------------- apps/v1

Deployment = O("Deployment", {
    "apiVersion": S, "kind": S, "metadata": ObjectMeta,
    "spec": O("DeploymentSpec", {
        "replicas": I, "selector": LabelSelector, "template": PodTemplateSpec,
        "strategy": O("DeploymentStrategy", {
            "type": S,
            "rollingUpdate": O("RollingUpdateDeployment", {"maxUnavailable": IOS, "maxSurge": IOS}),
        }),
        "minReadySeconds": I, "revisionHistoryLimit": I, "paused": B,
        "progressDeadlineSeconds": I,
    }),
    "status": ANY,
})

# ---------------------------------------------------------------- networking.k8s.io/v1

NetworkPolicyPort = O("NetworkPolicyPort", {"protocol": S, "port": IOS, "endPort": I})
NetworkPolicyPeer = O("NetworkPolicyPeer", {
    "podSelector": LabelSelector, "namespaceSelector": LabelSelector,
    "ipBlock": O("IPBlock", {"cidr": S, "except": L(S)}),
})
NetworkPolicy = O("NetworkPolicy", {
    "apiVersion": S, "kind": S, "metadata": ObjectMeta,
    "spec": O("NetworkPolicySpec", {
        "podSelector": LabelSelector,
        "ingress": L(O("NetworkPolicyIngressRule", {
            "ports": L(NetworkPolicyPort), "from": L(NetworkPolicyPeer)})),
        "egress": L(O("NetworkPolicyEgressRule", {
            "ports": L(NetworkPolicyPort), "to": L(NetworkPolicyPeer)})),
        "policyTypes": L(S),
    }),
})

ServiceCIDR = O("ServiceCIDR", {
    "apiVersion": S, "kind": S, "metadata": ObjectMeta,
    "spec": O("ServiceCIDRSpec", {"cidrs": L(S)}),
    "status": ANY,
})

# ---------------------------------------------------------------- node.k8s.io/v1

RuntimeClass = O("RuntimeClass", {
    "apiVersion": S, "kind": S, "metadata": ObjectMeta,
    "handler": S,
    "overhead": O("Overhead", {"podFixed": M(Q)}),
    "scheduling": O("Scheduling", {"nodeSelector": M(S), "tolerations": L(Toleration)}),
})

KINDS = {
    "Pod": Pod, "Namespace": Namespace, "Secret": Secret, "ConfigMap": ConfigMap,
    "Service": Service, "Event": Event, "Deployment": Deployment,
    "NetworkPolicy": NetworkPolicy, "RuntimeClass": RuntimeClass, "ServiceCIDR": ServiceCIDR,
}
