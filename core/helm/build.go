package helm

import (
	"bytes"
	"io"
	"strings"

	helmkube "helm.sh/helm/v4/pkg/kube"
)

// Build is Helm's Build of a manifest. khook builds without client-side
// validation (noClientValidation), where a document that lacks its kind or
// apiVersion fails to decode with an error that quotes the whole document
// ("Object 'Kind' is missing in '{...}'": a rendered document holds the
// chart's values). Such a failure is built again with Helm's validation,
// whose first check words it as the helm CLI does ("error validating
// data: [apiVersion not set, kind not set]") without the document: only
// on failure, since validation costs an OpenAPI fetch per group-version
// for the documents that have a kind.
//
// Helm asks for validation where khook's options cannot turn it off (the
// namespace of Install.CreateNamespace, built with validation on): khook
// builds without it there too, as everywhere (noClientValidation); it
// would cost the OpenAPI fetch for each such install.
func (k *kubeClient) Build(reader io.Reader, _ bool) (helmkube.ResourceList, error) {
	data, err := io.ReadAll(reader)
	if err != nil {
		return nil, err
	}
	list, err := k.Client.Build(bytes.NewReader(data), false)
	if err == nil || !quotesDocument(err) {
		return list, err
	}
	if _, verr := k.Client.Build(bytes.NewReader(data), true); verr != nil && strings.Contains(verr.Error(), "error validating data") {
		return nil, verr
	}
	return list, err
}

// quotesDocument reports whether err is a decode failure that quotes the
// document it could not decode (apimachinery's missing kind or version).
func quotesDocument(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Object 'Kind' is missing in") || strings.Contains(msg, "Object 'apiVersion' is missing in")
}
